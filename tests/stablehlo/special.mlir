module @jit_special_functions attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8xf32>, %arg1: tensor<8xi32>) -> (tensor<8xf32> {jax.result_info = "result[0]"}, tensor<8xf32> {jax.result_info = "result[1]"}, tensor<8xf32> {jax.result_info = "result[2]"}, tensor<8xf32> {jax.result_info = "result[3]"}, tensor<8xf32> {jax.result_info = "result[4]"}, tensor<8xf32> {jax.result_info = "result[5]"}, tensor<8xf32> {jax.result_info = "result[6]"}, tensor<8xf32> {jax.result_info = "result[7]"}) {
    %cst = stablehlo.constant dense<3.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %1 = stablehlo.multiply %arg0, %0 : tensor<8xf32>
    %2 = chlo.lgamma %1 : tensor<8xf32> -> tensor<8xf32>
    %cst_0 = stablehlo.constant dense<2.500000e+00> : tensor<f32>
    %3 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %4 = stablehlo.subtract %arg0, %3 : tensor<8xf32>
    %5 = chlo.digamma %4 : tensor<8xf32> -> tensor<8xf32>
    %cst_1 = stablehlo.constant dense<3.000000e+00> : tensor<f32>
    %6 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %7 = stablehlo.multiply %arg0, %6 : tensor<8xf32>
    %cst_2 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %8 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %9 = stablehlo.subtract %7, %8 : tensor<8xf32>
    %10 = chlo.erfc %9 : tensor<8xf32> -> tensor<8xf32>
    %cst_3 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
    %11 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %12 = stablehlo.multiply %arg0, %11 : tensor<8xf32>
    %cst_4 = stablehlo.constant dense<4.000000e+00> : tensor<f32>
    %13 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %14 = stablehlo.subtract %12, %13 : tensor<8xf32>
    %15 = chlo.bessel_i1e %14 : tensor<8xf32> -> tensor<8xf32>
    %cst_5 = stablehlo.constant dense<1.500000e+00> : tensor<f32>
    %16 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %17 = stablehlo.add %arg0, %16 : tensor<8xf32>
    %18 = chlo.zeta %17, %arg0 : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %cst_6 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %19 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %20 = stablehlo.add %arg0, %19 : tensor<8xf32>
    %21 = stablehlo.convert %arg1 : (tensor<8xi32>) -> tensor<8xf32>
    %22 = chlo.polygamma %21, %20 : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %23 = stablehlo.negate %arg0 : tensor<8xf32>
    %24 = chlo.next_after %arg0, %23 : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %cst_7 = stablehlo.constant dense<4.000000e+00> : tensor<f32>
    %25 = stablehlo.broadcast_in_dim %cst_7, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %26 = stablehlo.multiply %arg0, %25 : tensor<8xf32>
    %cst_8 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %27 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %28 = stablehlo.subtract %26, %27 : tensor<8xf32>
    %cst_9 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %29 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %30 = stablehlo.multiply %29, %28 : tensor<8xf32>
    %31 = stablehlo.negate %28 : tensor<8xf32>
    %cst_10 = stablehlo.constant dense<0.707106769> : tensor<f32>
    %32 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %33 = stablehlo.multiply %31, %32 : tensor<8xf32>
    %34 = chlo.erfc %33 : tensor<8xf32> -> tensor<8xf32>
    %35 = stablehlo.multiply %30, %34 : tensor<8xf32>
    return %2, %5, %10, %15, %18, %22, %24, %35 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
  }
}
