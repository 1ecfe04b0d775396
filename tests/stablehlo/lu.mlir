module @jit_lu attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x4xf32>) -> (tensor<4x4xf32> {jax.result_info = "result[0]"}, tensor<4xi32> {jax.result_info = "result[1]"}) {
    %0:2 = call @lu_factor(%arg0) : (tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4xi32>)
    return %0#0, %0#1 : tensor<4x4xf32>, tensor<4xi32>
  }
  func.func private @lu_factor(%arg0: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4xi32>) {
    %0:3 = stablehlo.custom_call @lapack_sgetrf_ffi(%arg0) {backend_config = "", mhlo.backend_config = {}, mhlo.frontend_attributes = {num_batch_dims = "0"}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([k, l], [m], []) {i=4, j=4, k=4, l=4, m=4}, custom>} : (tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4xi32>, tensor<i32>)
    %c = stablehlo.constant dense<1> : tensor<i32>
    %1 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<4xi32>
    %2 = stablehlo.subtract %0#1, %1 : tensor<4xi32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %3 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<i32>
    %4 = stablehlo.compare GE, %0#2, %3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %5 = stablehlo.broadcast_in_dim %4, dims = [] : (tensor<i1>) -> tensor<1x1xi1>
    %cst = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %6 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %7 = stablehlo.broadcast_in_dim %5, dims = [0, 1] : (tensor<1x1xi1>) -> tensor<4x4xi1>
    %8 = stablehlo.select %7, %0#0, %6 : tensor<4x4xi1>, tensor<4x4xf32>
    %9 = stablehlo.iota dim = 0 : tensor<4xi32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %10:4 = stablehlo.while(%iterArg = %2, %iterArg_3 = %c_2, %iterArg_4 = %c_1, %iterArg_5 = %9) : tensor<4xi32>, tensor<i32>, tensor<i32>, tensor<4xi32>
    cond {
      %c_6 = stablehlo.constant dense<4> : tensor<i32>
      %11 = stablehlo.compare LT, %iterArg_3, %c_6, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %11 : tensor<i1>
    } do {
      %11:2 = func.call @closed_call(%iterArg, %iterArg_4, %iterArg_5) : (tensor<4xi32>, tensor<i32>, tensor<4xi32>) -> (tensor<i32>, tensor<4xi32>)
      %c_6 = stablehlo.constant dense<1> : tensor<i32>
      %12 = stablehlo.add %iterArg_3, %c_6 : tensor<i32>
      stablehlo.return %iterArg, %12, %11#0, %11#1 : tensor<4xi32>, tensor<i32>, tensor<i32>, tensor<4xi32>
    }
    return %8, %2 : tensor<4x4xf32>, tensor<4xi32>
  }
  func.func private @closed_call(%arg0: tensor<4xi32>, %arg1: tensor<i32>, %arg2: tensor<4xi32>) -> (tensor<i32>, tensor<4xi32>) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.add %arg1, %c : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.compare LT, %arg1, %c_0, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %2 = stablehlo.convert %arg1 : tensor<i32>
    %c_1 = stablehlo.constant dense<4> : tensor<i32>
    %3 = stablehlo.add %2, %c_1 : tensor<i32>
    %4 = stablehlo.select %1, %3, %arg1 : tensor<i1>, tensor<i32>
    %5 = stablehlo.dynamic_slice %arg0, %4, sizes = [1] : (tensor<4xi32>, tensor<i32>) -> tensor<1xi32>
    %6 = stablehlo.reshape %5 : (tensor<1xi32>) -> tensor<i32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %7 = stablehlo.compare LT, %arg1, %c_2, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %8 = stablehlo.convert %arg1 : tensor<i32>
    %c_3 = stablehlo.constant dense<4> : tensor<i32>
    %9 = stablehlo.add %8, %c_3 : tensor<i32>
    %10 = stablehlo.select %7, %9, %arg1 : tensor<i1>, tensor<i32>
    %11 = stablehlo.dynamic_slice %arg2, %10, sizes = [1] : (tensor<4xi32>, tensor<i32>) -> tensor<1xi32>
    %12 = stablehlo.reshape %11 : (tensor<1xi32>) -> tensor<i32>
    %c_4 = stablehlo.constant dense<0> : tensor<i32>
    %13 = stablehlo.compare LT, %6, %c_4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_5 = stablehlo.constant dense<4> : tensor<i32>
    %14 = stablehlo.add %6, %c_5 : tensor<i32>
    %15 = stablehlo.select %13, %14, %6 : tensor<i1>, tensor<i32>
    %16 = stablehlo.dynamic_slice %arg2, %15, sizes = [1] : (tensor<4xi32>, tensor<i32>) -> tensor<1xi32>
    %17 = stablehlo.reshape %16 : (tensor<1xi32>) -> tensor<i32>
    %c_6 = stablehlo.constant dense<0> : tensor<i32>
    %18 = stablehlo.compare LT, %arg1, %c_6, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_7 = stablehlo.constant dense<4> : tensor<i32>
    %19 = stablehlo.add %arg1, %c_7 : tensor<i32>
    %20 = stablehlo.select %18, %19, %arg1 : tensor<i1>, tensor<i32>
    %21 = stablehlo.convert %20 : tensor<i32>
    %22 = stablehlo.broadcast_in_dim %21, dims = [] : (tensor<i32>) -> tensor<1xi32>
    %23 = "stablehlo.scatter"(%arg2, %22, %17) <{indices_are_sorted = true, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0]>, unique_indices = true}> ({
    ^bb0(%arg3: tensor<i32>, %arg4: tensor<i32>):
      stablehlo.return %arg4 : tensor<i32>
    }) : (tensor<4xi32>, tensor<1xi32>, tensor<i32>) -> tensor<4xi32>
    %c_8 = stablehlo.constant dense<0> : tensor<i32>
    %24 = stablehlo.compare LT, %6, %c_8, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_9 = stablehlo.constant dense<4> : tensor<i32>
    %25 = stablehlo.add %6, %c_9 : tensor<i32>
    %26 = stablehlo.select %24, %25, %6 : tensor<i1>, tensor<i32>
    %27 = stablehlo.broadcast_in_dim %26, dims = [] : (tensor<i32>) -> tensor<1xi32>
    %28 = "stablehlo.scatter"(%23, %27, %12) <{indices_are_sorted = true, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0]>, unique_indices = true}> ({
    ^bb0(%arg3: tensor<i32>, %arg4: tensor<i32>):
      stablehlo.return %arg4 : tensor<i32>
    }) : (tensor<4xi32>, tensor<1xi32>, tensor<i32>) -> tensor<4xi32>
    return %0, %28 : tensor<i32>, tensor<4xi32>
  }
}
