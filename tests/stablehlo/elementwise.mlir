module @jit_elementwise attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<10xf32>) -> (tensor<10xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.exponential %arg0 : tensor<10xf32>
    %1 = stablehlo.abs %arg0 : tensor<10xf32>
    %2 = stablehlo.log_plus_one %1 : tensor<10xf32>
    %3 = stablehlo.subtract %0, %2 : tensor<10xf32>
    %4 = stablehlo.abs %arg0 : tensor<10xf32>
    %5 = stablehlo.sqrt %4 : tensor<10xf32>
    %6 = stablehlo.sign %arg0 : tensor<10xf32>
    %7 = stablehlo.multiply %5, %6 : tensor<10xf32>
    %8 = stablehlo.add %3, %7 : tensor<10xf32>
    %9 = stablehlo.floor %arg0 : tensor<10xf32>
    %10 = stablehlo.add %8, %9 : tensor<10xf32>
    %11 = call @round(%arg0) : (tensor<10xf32>) -> tensor<10xf32>
    %12 = stablehlo.add %10, %11 : tensor<10xf32>
    %cst = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %13 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<10xf32>
    %14 = stablehlo.maximum %arg0, %13 : tensor<10xf32>
    %15 = stablehlo.multiply %14, %14 : tensor<10xf32>
    %16 = stablehlo.add %12, %15 : tensor<10xf32>
    %17 = stablehlo.negate %arg0 : tensor<10xf32>
    %18 = stablehlo.exponential %17 : tensor<10xf32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %19 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<10xf32>
    %20 = stablehlo.add %19, %18 : tensor<10xf32>
    %cst_1 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %21 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<10xf32>
    %22 = stablehlo.divide %21, %20 : tensor<10xf32>
    %23 = stablehlo.add %16, %22 : tensor<10xf32>
    return %23 : tensor<10xf32>
  }
  func.func private @round(%arg0: tensor<10xf32>) -> tensor<10xf32> {
    %0 = stablehlo.round_nearest_even %arg0 : tensor<10xf32>
    return %0 : tensor<10xf32>
  }
}
