module @jit_gather_2d attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x5xf32>, %arg1: tensor<2xi32>, %arg2: tensor<2xi32>) -> (tensor<2xf32> {jax.result_info = "result"}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %1 = stablehlo.compare LT, %arg1, %0, SIGNED : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
    %c_0 = stablehlo.constant dense<4> : tensor<i32>
    %2 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %3 = stablehlo.add %arg1, %2 : tensor<2xi32>
    %4 = stablehlo.select %1, %3, %arg1 : tensor<2xi1>, tensor<2xi32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %5 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %6 = stablehlo.compare LT, %arg2, %5, SIGNED : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
    %c_2 = stablehlo.constant dense<5> : tensor<i32>
    %7 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %8 = stablehlo.add %arg2, %7 : tensor<2xi32>
    %9 = stablehlo.select %6, %8, %arg2 : tensor<2xi1>, tensor<2xi32>
    %10 = stablehlo.broadcast_in_dim %4, dims = [0] : (tensor<2xi32>) -> tensor<2x1xi32>
    %11 = stablehlo.broadcast_in_dim %9, dims = [0] : (tensor<2xi32>) -> tensor<2x1xi32>
    %12 = stablehlo.concatenate %10, %11, dim = 1 : (tensor<2x1xi32>, tensor<2x1xi32>) -> tensor<2x2xi32>
    %13 = "stablehlo.gather"(%arg0, %12) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0, 1], start_index_map = [0, 1], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<4x5xf32>, tensor<2x2xi32>) -> tensor<2xf32>
    return %13 : tensor<2xf32>
  }
}
