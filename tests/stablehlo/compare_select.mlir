module @jit_compare_select attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<5xf32>, %arg1: tensor<5xf32>) -> (tensor<5xf32> {jax.result_info = "result[0]"}, tensor<5xi1> {jax.result_info = "result[1]"}) {
    %0 = stablehlo.compare GT, %arg0, %arg1, FLOAT : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xi1>
    %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<5xf32>
    %2 = stablehlo.multiply %arg1, %1 : tensor<5xf32>
    %3 = call @_where(%0, %arg0, %2) : (tensor<5xi1>, tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
    %4 = stablehlo.compare EQ, %arg0, %arg1, FLOAT : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xi1>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<5xf32>
    %6 = stablehlo.compare LT, %arg0, %5, FLOAT : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xi1>
    %7 = stablehlo.or %4, %6 : tensor<5xi1>
    return %3, %7 : tensor<5xf32>, tensor<5xi1>
  }
  func.func private @_where(%arg0: tensor<5xi1>, %arg1: tensor<5xf32>, %arg2: tensor<5xf32>) -> tensor<5xf32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<5xi1>, tensor<5xf32>
    return %0 : tensor<5xf32>
  }
}
