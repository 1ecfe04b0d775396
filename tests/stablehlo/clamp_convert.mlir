module @jit_clamp_convert attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<6xf32>) -> (tensor<6xi32> {jax.result_info = "result[0]"}, tensor<6xf32> {jax.result_info = "result[1]"}) {
    %cst = stablehlo.constant dense<-1.000000e+00> : tensor<f32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %2 = stablehlo.clamp %0, %arg0, %1 : tensor<6xf32>
    %3 = stablehlo.convert %2 : (tensor<6xf32>) -> tensor<6xi32>
    %4 = stablehlo.convert %arg0 : (tensor<6xf32>) -> tensor<6xi8>
    %5 = stablehlo.convert %4 : (tensor<6xi8>) -> tensor<6xf32>
    return %3, %5 : tensor<6xi32>, tensor<6xf32>
  }
}
