module @jit_complex_ops attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xf32> {jax.result_info = "result[0]"}, tensor<4xf32> {jax.result_info = "result[1]"}, tensor<4xf32> {jax.result_info = "result[2]"}) {
    %0 = stablehlo.complex %arg0, %arg1 : tensor<4xcomplex<f32>>
    %1 = stablehlo.multiply %0, %0 : tensor<4xcomplex<f32>>
    %2 = stablehlo.exponential %0 : tensor<4xcomplex<f32>>
    %3 = stablehlo.add %1, %2 : tensor<4xcomplex<f32>>
    %4 = stablehlo.real %3 : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
    %5 = stablehlo.imag %3 : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
    %6 = stablehlo.abs %0 : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
    return %4, %5, %6 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}
