module @jit_reductions attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<5x7xf32>) -> (tensor<7xf32> {jax.result_info = "result[0]"}, tensor<5xf32> {jax.result_info = "result[1]"}, tensor<f32> {jax.result_info = "result[2]"}, tensor<5xf32> {jax.result_info = "result[3]"}, tensor<f32> {jax.result_info = "result[4]"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<5x7xf32>, tensor<f32>) -> tensor<7xf32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %1 = stablehlo.reduce(%arg0 init: %cst_0) applies stablehlo.maximum across dimensions = [1] : (tensor<5x7xf32>, tensor<f32>) -> tensor<5xf32>
    %cst_1 = stablehlo.constant dense<0x7F800000> : tensor<f32>
    %2 = stablehlo.reduce(%arg0 init: %cst_1) applies stablehlo.minimum across dimensions = [0, 1] : (tensor<5x7xf32>, tensor<f32>) -> tensor<f32>
    %cst_2 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %3 = stablehlo.reduce(%arg0 init: %cst_2) applies stablehlo.multiply across dimensions = [1] : (tensor<5x7xf32>, tensor<f32>) -> tensor<5xf32>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %4 = stablehlo.reduce(%arg0 init: %cst_3) applies stablehlo.add across dimensions = [0, 1] : (tensor<5x7xf32>, tensor<f32>) -> tensor<f32>
    %cst_4 = stablehlo.constant dense<3.500000e+01> : tensor<f32>
    %5 = stablehlo.divide %4, %cst_4 : tensor<f32>
    return %0, %1, %2, %3, %5 : tensor<7xf32>, tensor<5xf32>, tensor<f32>, tensor<5xf32>, tensor<f32>
  }
}
