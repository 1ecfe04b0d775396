module @jit_inv_det attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3x3xf32>) -> (tensor<2x3x3xf32> {jax.result_info = "result[0]"}, tensor<2xf32> {jax.result_info = "result[1]"}) {
    %0 = call @inv(%arg0) : (tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
    %1 = call @det(%arg0) : (tensor<2x3x3xf32>) -> tensor<2xf32>
    return %0, %1 : tensor<2x3x3xf32>, tensor<2xf32>
  }
  func.func private @inv(%arg0: tensor<2x3x3xf32>) -> tensor<2x3x3xf32> {
    %0 = stablehlo.iota dim = 0 : tensor<3x3xi32>
    %1 = stablehlo.iota dim = 1 : tensor<3x3xi32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %2 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<3x3xi32>
    %3 = stablehlo.add %0, %2 : tensor<3x3xi32>
    %4 = stablehlo.compare EQ, %3, %1, SIGNED : (tensor<3x3xi32>, tensor<3x3xi32>) -> tensor<3x3xi1>
    %5 = stablehlo.convert %4 : (tensor<3x3xi1>) -> tensor<3x3xf32>
    %6 = stablehlo.broadcast_in_dim %5, dims = [1, 2] : (tensor<3x3xf32>) -> tensor<2x3x3xf32>
    %7 = call @solve(%arg0, %6) : (tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
    return %7 : tensor<2x3x3xf32>
  }
  func.func private @solve(%arg0: tensor<2x3x3xf32>, %arg1: tensor<2x3x3xf32>) -> tensor<2x3x3xf32> {
    %0:3 = stablehlo.custom_call @lapack_sgetrf_ffi(%arg0) {backend_config = "", mhlo.backend_config = {}, mhlo.frontend_attributes = {num_batch_dims = "1"}, operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 0]> : tensor<2xindex>, dense<0> : tensor<1xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j, k])->([i, l, m], [i, n], [i]) {i=2, j=3, k=3, l=3, m=3, n=3}, custom>} : (tensor<2x3x3xf32>) -> (tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2xi32>)
    %c = stablehlo.constant dense<1> : tensor<i32>
    %1 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<2x3xi32>
    %2 = stablehlo.subtract %0#1, %1 : tensor<2x3xi32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %3 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %4 = stablehlo.compare GE, %0#2, %3, SIGNED : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
    %5 = stablehlo.broadcast_in_dim %4, dims = [0] : (tensor<2xi1>) -> tensor<2x1x1xi1>
    %cst = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %6 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x3x3xf32>
    %7 = stablehlo.broadcast_in_dim %5, dims = [0, 1, 2] : (tensor<2x1x1xi1>) -> tensor<2x3x3xi1>
    %8 = stablehlo.select %7, %0#0, %6 : tensor<2x3x3xi1>, tensor<2x3x3xf32>
    %9 = stablehlo.iota dim = 1 : tensor<2x3xi32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %10:4 = stablehlo.while(%iterArg = %2, %iterArg_3 = %c_2, %iterArg_4 = %c_1, %iterArg_5 = %9) : tensor<2x3xi32>, tensor<i32>, tensor<i32>, tensor<2x3xi32>
    cond {
      %c_6 = stablehlo.constant dense<3> : tensor<i32>
      %14 = stablehlo.compare LT, %iterArg_3, %c_6, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %14 : tensor<i1>
    } do {
      %14:2 = func.call @closed_call(%iterArg, %iterArg_4, %iterArg_5) : (tensor<2x3xi32>, tensor<i32>, tensor<2x3xi32>) -> (tensor<i32>, tensor<2x3xi32>)
      %c_6 = stablehlo.constant dense<1> : tensor<i32>
      %15 = stablehlo.add %iterArg_3, %c_6 : tensor<i32>
      stablehlo.return %iterArg, %15, %14#0, %14#1 : tensor<2x3xi32>, tensor<i32>, tensor<i32>, tensor<2x3xi32>
    }
    %11 = stablehlo.transpose %arg1, dims = [0, 2, 1] : (tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
    %12 = call @_lu_solve(%8, %10#3, %11) : (tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
    %13 = stablehlo.transpose %12, dims = [0, 2, 1] : (tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
    return %13 : tensor<2x3x3xf32>
  }
  func.func private @closed_call(%arg0: tensor<2x3xi32>, %arg1: tensor<i32>, %arg2: tensor<2x3xi32>) -> (tensor<i32>, tensor<2x3xi32>) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.add %arg1, %c : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.compare LT, %arg1, %c_0, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %2 = stablehlo.convert %arg1 : tensor<i32>
    %c_1 = stablehlo.constant dense<3> : tensor<i32>
    %3 = stablehlo.add %2, %c_1 : tensor<i32>
    %4 = stablehlo.select %1, %3, %arg1 : tensor<i1>, tensor<i32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [] : (tensor<i32>) -> tensor<1xi32>
    %6 = "stablehlo.gather"(%arg0, %5) <{dimension_numbers = #stablehlo.gather<offset_dims = [0, 1], start_index_map = [1]>, indices_are_sorted = true, slice_sizes = array<i64: 2, 1>}> : (tensor<2x3xi32>, tensor<1xi32>) -> tensor<2x1xi32>
    %7 = stablehlo.reshape %6 : (tensor<2x1xi32>) -> tensor<2xi32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %8 = stablehlo.compare LT, %arg1, %c_2, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %9 = stablehlo.convert %arg1 : tensor<i32>
    %c_3 = stablehlo.constant dense<3> : tensor<i32>
    %10 = stablehlo.add %9, %c_3 : tensor<i32>
    %11 = stablehlo.select %8, %10, %arg1 : tensor<i1>, tensor<i32>
    %12 = stablehlo.broadcast_in_dim %11, dims = [] : (tensor<i32>) -> tensor<1xi32>
    %13 = "stablehlo.gather"(%arg2, %12) <{dimension_numbers = #stablehlo.gather<offset_dims = [0, 1], start_index_map = [1]>, indices_are_sorted = true, slice_sizes = array<i64: 2, 1>}> : (tensor<2x3xi32>, tensor<1xi32>) -> tensor<2x1xi32>
    %14 = stablehlo.reshape %13 : (tensor<2x1xi32>) -> tensor<2xi32>
    %c_4 = stablehlo.constant dense<0> : tensor<i32>
    %15 = stablehlo.broadcast_in_dim %c_4, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %16 = stablehlo.compare LT, %7, %15, SIGNED : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
    %c_5 = stablehlo.constant dense<3> : tensor<i32>
    %17 = stablehlo.broadcast_in_dim %c_5, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %18 = stablehlo.add %7, %17 : tensor<2xi32>
    %19 = stablehlo.select %16, %18, %7 : tensor<2xi1>, tensor<2xi32>
    %20 = stablehlo.broadcast_in_dim %19, dims = [0] : (tensor<2xi32>) -> tensor<2x1xi32>
    %21 = "stablehlo.gather"(%arg2, %20) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 1>, indices_are_sorted = true, slice_sizes = array<i64: 1, 1>}> : (tensor<2x3xi32>, tensor<2x1xi32>) -> tensor<2x1xi32>
    %22 = stablehlo.reshape %21 : (tensor<2x1xi32>) -> tensor<2xi32>
    %c_6 = stablehlo.constant dense<0> : tensor<i32>
    %23 = stablehlo.compare LT, %arg1, %c_6, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_7 = stablehlo.constant dense<3> : tensor<i32>
    %24 = stablehlo.add %arg1, %c_7 : tensor<i32>
    %25 = stablehlo.select %23, %24, %arg1 : tensor<i1>, tensor<i32>
    %26 = stablehlo.convert %25 : tensor<i32>
    %27 = stablehlo.broadcast_in_dim %26, dims = [] : (tensor<i32>) -> tensor<1xi32>
    %28 = "stablehlo.scatter"(%arg2, %27, %22) <{indices_are_sorted = true, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0], inserted_window_dims = [1], scatter_dims_to_operand_dims = [1]>, unique_indices = true}> ({
    ^bb0(%arg3: tensor<i32>, %arg4: tensor<i32>):
      stablehlo.return %arg4 : tensor<i32>
    }) : (tensor<2x3xi32>, tensor<1xi32>, tensor<2xi32>) -> tensor<2x3xi32>
    %c_8 = stablehlo.constant dense<0> : tensor<i32>
    %29 = stablehlo.broadcast_in_dim %c_8, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %30 = stablehlo.compare LT, %7, %29, SIGNED : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
    %c_9 = stablehlo.constant dense<3> : tensor<i32>
    %31 = stablehlo.broadcast_in_dim %c_9, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %32 = stablehlo.add %7, %31 : tensor<2xi32>
    %33 = stablehlo.select %30, %32, %7 : tensor<2xi1>, tensor<2xi32>
    %34 = stablehlo.broadcast_in_dim %33, dims = [0] : (tensor<2xi32>) -> tensor<2x1xi32>
    %35 = "stablehlo.scatter"(%28, %34, %14) <{indices_are_sorted = true, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [1], input_batching_dims = [0], scatter_indices_batching_dims = [0], scatter_dims_to_operand_dims = [1], index_vector_dim = 1>, unique_indices = true}> ({
    ^bb0(%arg3: tensor<i32>, %arg4: tensor<i32>):
      stablehlo.return %arg4 : tensor<i32>
    }) : (tensor<2x3xi32>, tensor<2x1xi32>, tensor<2xi32>) -> tensor<2x3xi32>
    return %0, %35 : tensor<i32>, tensor<2x3xi32>
  }
  func.func private @_lu_solve(%arg0: tensor<2x3x3xf32>, %arg1: tensor<2x3xi32>, %arg2: tensor<2x3x3xf32>) -> tensor<2x3x3xf32> {
    %0 = stablehlo.broadcast_in_dim %arg2, dims = [0, 1, 2] : (tensor<2x3x3xf32>) -> tensor<2x3x3x1xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<2x3xi32>
    %2 = stablehlo.compare LT, %arg1, %1, SIGNED : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi1>
    %c_0 = stablehlo.constant dense<3> : tensor<i32>
    %3 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<2x3xi32>
    %4 = stablehlo.add %arg1, %3 : tensor<2x3xi32>
    %5 = stablehlo.select %2, %4, %arg1 : tensor<2x3xi1>, tensor<2x3xi32>
    %6 = stablehlo.broadcast_in_dim %5, dims = [0, 1] : (tensor<2x3xi32>) -> tensor<2x3x1xi32>
    %7 = "stablehlo.gather"(%0, %6) <{dimension_numbers = #stablehlo.gather<offset_dims = [1, 3], collapsed_slice_dims = [2], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [2], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, 3, 1, 1>}> : (tensor<2x3x3x1xf32>, tensor<2x3x1xi32>) -> tensor<2x3x3x1xf32>
    %8 = stablehlo.transpose %7, dims = [0, 2, 3, 1] : (tensor<2x3x3x1xf32>) -> tensor<2x3x1x3xf32>
    %9 = stablehlo.reshape %8 : (tensor<2x3x1x3xf32>) -> tensor<2x3x3xf32>
    %10 = stablehlo.custom_call @lapack_strsm_ffi(%arg0, %9) {backend_config = "", mhlo.backend_config = {diag = 85 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8}, mhlo.frontend_attributes = {num_batch_dims = "1"}, operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 2, 0]> : tensor<3xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 1, operand_tuple_indices = []>], result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j, k], [i, l, m])->([i, n, o]) {i=2, j=3, k=3, l=3, m=3, n=3, o=3}, custom>} : (tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
    %11 = stablehlo.reshape %10 : (tensor<2x3x3xf32>) -> tensor<2x3x1x3xf32>
    %12 = stablehlo.reshape %11 : (tensor<2x3x1x3xf32>) -> tensor<2x3x3xf32>
    %13 = stablehlo.custom_call @lapack_strsm_ffi(%arg0, %12) {backend_config = "", mhlo.backend_config = {diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 85 : ui8}, mhlo.frontend_attributes = {num_batch_dims = "1"}, operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 2, 0]> : tensor<3xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 1, operand_tuple_indices = []>], result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j, k], [i, l, m])->([i, n, o]) {i=2, j=3, k=3, l=3, m=3, n=3, o=3}, custom>} : (tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
    %14 = stablehlo.reshape %13 : (tensor<2x3x3xf32>) -> tensor<2x3x1x3xf32>
    %15 = stablehlo.transpose %14, dims = [0, 3, 1, 2] : (tensor<2x3x1x3xf32>) -> tensor<2x3x3x1xf32>
    %16 = stablehlo.reshape %15 : (tensor<2x3x3x1xf32>) -> tensor<2x3x3xf32>
    return %16 : tensor<2x3x3xf32>
  }
  func.func private @det(%arg0: tensor<2x3x3xf32>) -> tensor<2xf32> {
    %0 = stablehlo.slice %arg0 [0:2, 0:1, 0:1] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %1 = stablehlo.reshape %0 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %2 = stablehlo.slice %arg0 [0:2, 1:2, 1:2] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %3 = stablehlo.reshape %2 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %4 = stablehlo.multiply %1, %3 : tensor<2xf32>
    %5 = stablehlo.slice %arg0 [0:2, 2:3, 2:3] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %6 = stablehlo.reshape %5 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %7 = stablehlo.multiply %4, %6 : tensor<2xf32>
    %8 = stablehlo.slice %arg0 [0:2, 0:1, 1:2] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %9 = stablehlo.reshape %8 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %10 = stablehlo.slice %arg0 [0:2, 1:2, 2:3] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %11 = stablehlo.reshape %10 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %12 = stablehlo.multiply %9, %11 : tensor<2xf32>
    %13 = stablehlo.slice %arg0 [0:2, 2:3, 0:1] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %14 = stablehlo.reshape %13 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %15 = stablehlo.multiply %12, %14 : tensor<2xf32>
    %16 = stablehlo.add %7, %15 : tensor<2xf32>
    %17 = stablehlo.slice %arg0 [0:2, 0:1, 2:3] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %18 = stablehlo.reshape %17 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %19 = stablehlo.slice %arg0 [0:2, 1:2, 0:1] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %20 = stablehlo.reshape %19 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %21 = stablehlo.multiply %18, %20 : tensor<2xf32>
    %22 = stablehlo.slice %arg0 [0:2, 2:3, 1:2] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %23 = stablehlo.reshape %22 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %24 = stablehlo.multiply %21, %23 : tensor<2xf32>
    %25 = stablehlo.add %16, %24 : tensor<2xf32>
    %26 = stablehlo.slice %arg0 [0:2, 0:1, 2:3] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %27 = stablehlo.reshape %26 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %28 = stablehlo.slice %arg0 [0:2, 1:2, 1:2] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %29 = stablehlo.reshape %28 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %30 = stablehlo.multiply %27, %29 : tensor<2xf32>
    %31 = stablehlo.slice %arg0 [0:2, 2:3, 0:1] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %32 = stablehlo.reshape %31 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %33 = stablehlo.multiply %30, %32 : tensor<2xf32>
    %34 = stablehlo.subtract %25, %33 : tensor<2xf32>
    %35 = stablehlo.slice %arg0 [0:2, 0:1, 0:1] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %36 = stablehlo.reshape %35 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %37 = stablehlo.slice %arg0 [0:2, 1:2, 2:3] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %38 = stablehlo.reshape %37 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %39 = stablehlo.multiply %36, %38 : tensor<2xf32>
    %40 = stablehlo.slice %arg0 [0:2, 2:3, 1:2] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %41 = stablehlo.reshape %40 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %42 = stablehlo.multiply %39, %41 : tensor<2xf32>
    %43 = stablehlo.subtract %34, %42 : tensor<2xf32>
    %44 = stablehlo.slice %arg0 [0:2, 0:1, 1:2] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %45 = stablehlo.reshape %44 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %46 = stablehlo.slice %arg0 [0:2, 1:2, 0:1] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %47 = stablehlo.reshape %46 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %48 = stablehlo.multiply %45, %47 : tensor<2xf32>
    %49 = stablehlo.slice %arg0 [0:2, 2:3, 2:3] : (tensor<2x3x3xf32>) -> tensor<2x1x1xf32>
    %50 = stablehlo.reshape %49 : (tensor<2x1x1xf32>) -> tensor<2xf32>
    %51 = stablehlo.multiply %48, %50 : tensor<2xf32>
    %52 = stablehlo.subtract %43, %51 : tensor<2xf32>
    return %52 : tensor<2xf32>
  }
}
