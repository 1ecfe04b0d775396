module @jit__collectives attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]> {stablehlo.mesh = {axes = [{name = "x", size = 2 : i64}, {name = "y", size = 2 : i64}]}}
  func.func public @main(%arg0: tensor<8x8xf32>, %arg1: tensor<8x4xf32>) -> (tensor<16x4xf32> {jax.result_info = "result[0]"}, tensor<16x8xf32> {jax.result_info = "result[1]"}, tensor<16x2xf32> {jax.result_info = "result[2]"}, tensor<8x8xf32> {jax.result_info = "result[3]"}, tensor<16x4xf32> {jax.result_info = "result[4]"}, tensor<16x4xf32> {jax.result_info = "result[5]"}) {
    %0:6 = sdy.manual_computation(%arg0, %arg1) in_shardings=[<@mesh, [{"x"}, {"y"}]>, <@mesh, [{"y"}, {}]>] out_shardings=[<@mesh, [{"x", "y"}, {}]>, <@mesh, [{"x", "y"}, {}]>, <@mesh, [{"x", "y"}, {}]>, <@mesh, [{"x", "y"}, {}]>, <@mesh, [{"x", "y"}, {}]>, <@mesh, [{"x", "y"}, {}]>] manual_axes={"x", "y"} (%arg2: tensor<4x4xf32>, %arg3: tensor<4x4xf32>) {
      %1 = "stablehlo.all_reduce"(%arg2) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>, use_global_device_ids}> ({
      ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
        %14 = stablehlo.add %arg4, %arg5 : tensor<f32>
        stablehlo.return %14 : tensor<f32>
      }) : (tensor<4x4xf32>) -> tensor<4x4xf32>
      %2 = "stablehlo.all_gather"(%arg2) <{all_gather_dim = 1 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>, use_global_device_ids}> : (tensor<4x4xf32>) -> tensor<4x8xf32>
      %3 = "stablehlo.reduce_scatter"(%arg3) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, scatter_dimension = 1 : i64, use_global_device_ids}> ({
      ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
        %14 = stablehlo.add %arg4, %arg5 : tensor<f32>
        stablehlo.return %14 : tensor<f32>
      }) : (tensor<4x4xf32>) -> tensor<4x2xf32>
      %4 = "stablehlo.all_to_all"(%arg2) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, concat_dimension = 1 : i64, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, split_count = 2 : i64, split_dimension = 0 : i64}> : (tensor<4x4xf32>) -> tensor<2x8xf32>
      %5 = "stablehlo.collective_permute"(%arg3) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[0, 2], [2, 0], [1, 3], [3, 1]]> : tensor<4x2xi64>}> : (tensor<4x4xf32>) -> tensor<4x4xf32>
      %6 = "stablehlo.all_reduce"(%arg3) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
      ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
        %14 = stablehlo.maximum %arg4, %arg5 : tensor<f32>
        stablehlo.return %14 : tensor<f32>
      }) : (tensor<4x4xf32>) -> tensor<4x4xf32>
      %c = stablehlo.constant dense<1> : tensor<ui32>
      %c_0 = stablehlo.constant dense<2> : tensor<ui32>
      %7 = stablehlo.partition_id : tensor<ui32>
      %8 = stablehlo.divide %7, %c : tensor<ui32>
      %9 = stablehlo.remainder %8, %c_0 : tensor<ui32>
      %10 = stablehlo.convert %9 : (tensor<ui32>) -> tensor<i32>
      %11 = stablehlo.convert %10 : (tensor<i32>) -> tensor<f32>
      %12 = stablehlo.broadcast_in_dim %11, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
      %13 = stablehlo.multiply %6, %12 : tensor<4x4xf32>
      sdy.return %1, %2, %3, %4, %5, %13 : tensor<4x4xf32>, tensor<4x8xf32>, tensor<4x2xf32>, tensor<2x8xf32>, tensor<4x4xf32>, tensor<4x4xf32>
    } : (tensor<8x8xf32>, tensor<8x4xf32>) -> (tensor<16x4xf32>, tensor<16x8xf32>, tensor<16x2xf32>, tensor<8x8xf32>, tensor<16x4xf32>, tensor<16x4xf32>)
    return %0#0, %0#1, %0#2, %0#3, %0#4, %0#5 : tensor<16x4xf32>, tensor<16x8xf32>, tensor<16x2xf32>, tensor<8x8xf32>, tensor<16x4xf32>, tensor<16x4xf32>
  }
}
