module @jit_pad_reverse attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3x2xf32>) -> (tensor<6x3xf32> {jax.result_info = "result[0]"}, tensor<3x2xf32> {jax.result_info = "result[1]"}, tensor<5x3xf32> {jax.result_info = "result[2]"}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = call @_pad(%arg0, %c) : (tensor<3x2xf32>, tensor<i32>) -> tensor<6x3xf32>
    %1 = call @_flip(%arg0) : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.pad %arg0, %cst, low = [0, 1], high = [0, 0], interior = [1, 0] : (tensor<3x2xf32>, tensor<f32>) -> tensor<5x3xf32>
    return %0, %1, %2 : tensor<6x3xf32>, tensor<3x2xf32>, tensor<5x3xf32>
  }
  func.func private @_pad(%arg0: tensor<3x2xf32>, %arg1: tensor<i32>) -> tensor<6x3xf32> {
    %0 = stablehlo.convert %arg1 : (tensor<i32>) -> tensor<f32>
    %1 = stablehlo.pad %arg0, %0, low = [1, 0], high = [2, 1], interior = [0, 0] : (tensor<3x2xf32>, tensor<f32>) -> tensor<6x3xf32>
    return %1 : tensor<6x3xf32>
  }
  func.func private @_flip(%arg0: tensor<3x2xf32>) -> tensor<3x2xf32> {
    %0 = stablehlo.reverse %arg0, dims = [0] : tensor<3x2xf32>
    return %0 : tensor<3x2xf32>
  }
}
