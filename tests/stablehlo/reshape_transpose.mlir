module @jit_reshape_transpose attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3x4xf32>) -> (tensor<8x3xf32> {jax.result_info = "result[0]"}, tensor<48xf32> {jax.result_info = "result[1]"}, tensor<2x2x2xf32> {jax.result_info = "result[2]"}) {
    %0 = stablehlo.reshape %arg0 : (tensor<2x3x4xf32>) -> tensor<3x8xf32>
    %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<3x8xf32>) -> tensor<8x3xf32>
    %2 = stablehlo.reshape %arg0 : (tensor<2x3x4xf32>) -> tensor<24xf32>
    %3 = stablehlo.reshape %arg0 : (tensor<2x3x4xf32>) -> tensor<24xf32>
    %4 = stablehlo.concatenate %2, %3, dim = 0 : (tensor<24xf32>, tensor<24xf32>) -> tensor<48xf32>
    %5 = stablehlo.slice %arg0 [0:2, 1:3, 0:4:2] : (tensor<2x3x4xf32>) -> tensor<2x2x2xf32>
    %6 = stablehlo.reverse %5, dims = [0] : tensor<2x2x2xf32>
    return %1, %4, %6 : tensor<8x3xf32>, tensor<48xf32>, tensor<2x2x2xf32>
  }
}
