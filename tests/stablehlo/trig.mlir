module @jit_trig attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<6xf32>) -> (tensor<6xf32> {jax.result_info = "result[0]"}, tensor<6xf32> {jax.result_info = "result[1]"}, tensor<6xf32> {jax.result_info = "result[2]"}, tensor<6xf32> {jax.result_info = "result[3]"}) {
    %0 = stablehlo.tanh %arg0 : tensor<6xf32>
    %1 = chlo.asin %0 : tensor<6xf32> -> tensor<6xf32>
    %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %3 = stablehlo.atan2 %arg0, %2 : tensor<6xf32>
    %4 = chlo.sinh %arg0 : tensor<6xf32> -> tensor<6xf32>
    %5 = stablehlo.multiply %arg0, %arg0 : tensor<6xf32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %6 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %7 = stablehlo.add %6, %5 : tensor<6xf32>
    %8 = call @arccosh(%7) : (tensor<6xf32>) -> tensor<6xf32>
    return %1, %3, %4, %8 : tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>
  }
  func.func private @arccosh(%arg0: tensor<6xf32>) -> tensor<6xf32> {
    %0 = chlo.acosh %arg0 : tensor<6xf32> -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}
