module @jit_mlp_grad attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3x4xf32>, %arg1: tensor<4x2xf32>) -> (tensor<4x2xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
    %1 = stablehlo.tanh %0 : tensor<3x2xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3x2xf32>
    %3 = stablehlo.subtract %2, %1 : tensor<3x2xf32>
    %cst_0 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<3x2xf32>
    %5 = stablehlo.multiply %4, %1 : tensor<3x2xf32>
    %cst_1 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %6 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<3x2xf32>
    %7 = stablehlo.multiply %6, %5 : tensor<3x2xf32>
    %8 = stablehlo.multiply %7, %3 : tensor<3x2xf32>
    %9 = stablehlo.multiply %8, %1 : tensor<3x2xf32>
    %10 = stablehlo.add %8, %9 : tensor<3x2xf32>
    %11 = stablehlo.dot_general %10, %arg0, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x2xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %12 = stablehlo.transpose %11, dims = [1, 0] : (tensor<2x4xf32>) -> tensor<4x2xf32>
    return %12 : tensor<4x2xf32>
  }
}
