module @jit_erf_inv attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<6xf32>) -> (tensor<6xf32> {jax.result_info = "result[0]"}, tensor<6xf32> {jax.result_info = "result[1]"}) {
    %0 = chlo.erf %arg0 : tensor<6xf32> -> tensor<6xf32>
    %1 = stablehlo.tanh %arg0 : tensor<6xf32>
    %cst = stablehlo.constant dense<0.899999976> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %3 = stablehlo.multiply %1, %2 : tensor<6xf32>
    %4 = chlo.erf_inv %3 : tensor<6xf32> -> tensor<6xf32>
    return %0, %4 : tensor<6xf32>, tensor<6xf32>
  }
}
