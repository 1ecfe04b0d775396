module @jit_bf16_math attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3x4xf32>, %arg1: tensor<3x4xf32>) -> (tensor<3x4xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.convert %arg0 : (tensor<3x4xf32>) -> tensor<3x4xbf16>
    %1 = stablehlo.convert %arg1 : (tensor<3x4xf32>) -> tensor<3x4xbf16>
    %2 = stablehlo.multiply %0, %1 : tensor<3x4xbf16>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<bf16>
    %3 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<bf16>) -> tensor<3x4xbf16>
    %4 = stablehlo.add %2, %3 : tensor<3x4xbf16>
    %5 = stablehlo.convert %4 : (tensor<3x4xbf16>) -> tensor<3x4xf32>
    return %5 : tensor<3x4xf32>
  }
}
