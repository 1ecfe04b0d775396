module @jit_tridiagonal_solve attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<5xf32>, %arg1: tensor<4xf32>, %arg2: tensor<5x2xf32>) -> (tensor<5x2xf32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %1 = stablehlo.concatenate %0, %arg1, dim = 0 : (tensor<1xf32>, tensor<4xf32>) -> tensor<5xf32>
    %2 = stablehlo.concatenate %arg1, %0, dim = 0 : (tensor<4xf32>, tensor<1xf32>) -> tensor<5xf32>
    %3:5 = stablehlo.custom_call @lapack_sgtsv_ffi(%1, %arg0, %2, %arg2) {backend_config = "", mhlo.backend_config = {}, mhlo.frontend_attributes = {num_batch_dims = "0"}, operand_layouts = [dense<0> : tensor<1xindex>, dense<0> : tensor<1xindex>, dense<0> : tensor<1xindex>, dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>, #stablehlo.output_operand_alias<output_tuple_indices = [1], operand_index = 1, operand_tuple_indices = []>, #stablehlo.output_operand_alias<output_tuple_indices = [2], operand_index = 2, operand_tuple_indices = []>, #stablehlo.output_operand_alias<output_tuple_indices = [3], operand_index = 3, operand_tuple_indices = []>], result_layouts = [dense<0> : tensor<1xindex>, dense<0> : tensor<1xindex>, dense<0> : tensor<1xindex>, dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i], [j], [k], [l, m])->([n], [o], [p], [q, r], []) {i=5, j=5, k=5, l=5, m=2, n=5, o=5, p=5, q=5, r=2}, custom>} : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5x2xf32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5x2xf32>, tensor<i32>)
    %c = stablehlo.constant dense<0> : tensor<i32>
    %4 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<i32>
    %5 = stablehlo.compare EQ, %3#4, %4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %6 = stablehlo.broadcast_in_dim %5, dims = [] : (tensor<i1>) -> tensor<1x1xi1>
    %cst_0 = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<5x2xf32>
    %8 = stablehlo.broadcast_in_dim %6, dims = [0, 1] : (tensor<1x1xi1>) -> tensor<5x2xi1>
    %9 = stablehlo.select %8, %3#3, %7 : tensor<5x2xi1>, tensor<5x2xf32>
    return %9 : tensor<5x2xf32>
  }
}
