module @jit_iota_broadcast attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x4xf32>) -> (tensor<2x4xf32> {jax.result_info = "result[0]"}, tensor<3x3xf32> {jax.result_info = "result[1]"}, tensor<3x4xf32> {jax.result_info = "result[2]"}) {
    %0 = stablehlo.iota dim = 0 : tensor<4xf32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
    %3 = stablehlo.add %arg0, %2 : tensor<2x4xf32>
    %4 = stablehlo.iota dim = 0 : tensor<3x3xi32>
    %5 = stablehlo.iota dim = 1 : tensor<3x3xi32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %6 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<3x3xi32>
    %7 = stablehlo.add %4, %6 : tensor<3x3xi32>
    %8 = stablehlo.compare EQ, %7, %5, SIGNED : (tensor<3x3xi32>, tensor<3x3xi32>) -> tensor<3x3xi1>
    %9 = stablehlo.convert %8 : (tensor<3x3xi1>) -> tensor<3x3xf32>
    %10 = stablehlo.iota dim = 0 : tensor<3x4xi32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %11 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<3x4xi32>
    %12 = stablehlo.add %10, %11 : tensor<3x4xi32>
    %13 = stablehlo.iota dim = 1 : tensor<3x4xi32>
    %14 = stablehlo.compare GE, %12, %13, SIGNED : (tensor<3x4xi32>, tensor<3x4xi32>) -> tensor<3x4xi1>
    %15 = stablehlo.convert %14 : (tensor<3x4xi1>) -> tensor<3x4xf32>
    return %3, %9, %15 : tensor<2x4xf32>, tensor<3x3xf32>, tensor<3x4xf32>
  }
}
