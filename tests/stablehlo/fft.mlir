module @jit_fft_real attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3x8xf32>) -> (tensor<3x8xf32> {jax.result_info = "result[0]"}, tensor<3x8xcomplex<f32>> {jax.result_info = "result[1]"}) {
    %0 = call @fft(%arg0) : (tensor<3x8xf32>) -> tensor<3x5xcomplex<f32>>
    %1 = stablehlo.iota dim = 0 : tensor<5xf32>
    %2 = stablehlo.negate %1 : tensor<5xf32>
    %3 = stablehlo.exponential %2 : tensor<5xf32>
    %4 = stablehlo.convert %3 : (tensor<5xf32>) -> tensor<5xcomplex<f32>>
    %5 = stablehlo.broadcast_in_dim %4, dims = [1] : (tensor<5xcomplex<f32>>) -> tensor<1x5xcomplex<f32>>
    %6 = stablehlo.broadcast_in_dim %5, dims = [0, 1] : (tensor<1x5xcomplex<f32>>) -> tensor<3x5xcomplex<f32>>
    %7 = stablehlo.multiply %0, %6 : tensor<3x5xcomplex<f32>>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %8 = call @_pad(%7, %c) : (tensor<3x5xcomplex<f32>>, tensor<i32>) -> tensor<3x5xcomplex<f32>>
    %9 = call @fft_0(%8) : (tensor<3x5xcomplex<f32>>) -> tensor<3x8xf32>
    %10 = call @fft_1(%arg0) : (tensor<3x8xf32>) -> tensor<3x8xcomplex<f32>>
    return %9, %10 : tensor<3x8xf32>, tensor<3x8xcomplex<f32>>
  }
  func.func private @fft(%arg0: tensor<3x8xf32>) -> tensor<3x5xcomplex<f32>> {
    %0 = stablehlo.fft %arg0, type = RFFT, length = [8] : (tensor<3x8xf32>) -> tensor<3x5xcomplex<f32>>
    return %0 : tensor<3x5xcomplex<f32>>
  }
  func.func private @_pad(%arg0: tensor<3x5xcomplex<f32>>, %arg1: tensor<i32>) -> tensor<3x5xcomplex<f32>> {
    %0 = stablehlo.convert %arg1 : (tensor<i32>) -> tensor<complex<f32>>
    %1 = stablehlo.pad %arg0, %0, low = [0, 0], high = [0, 0], interior = [0, 0] : (tensor<3x5xcomplex<f32>>, tensor<complex<f32>>) -> tensor<3x5xcomplex<f32>>
    return %1 : tensor<3x5xcomplex<f32>>
  }
  func.func private @fft_0(%arg0: tensor<3x5xcomplex<f32>>) -> tensor<3x8xf32> {
    %0 = stablehlo.fft %arg0, type = IRFFT, length = [8] : (tensor<3x5xcomplex<f32>>) -> tensor<3x8xf32>
    return %0 : tensor<3x8xf32>
  }
  func.func private @fft_1(%arg0: tensor<3x8xf32>) -> tensor<3x8xcomplex<f32>> {
    %0 = stablehlo.convert %arg0 : (tensor<3x8xf32>) -> tensor<3x8xcomplex<f32>>
    %1 = stablehlo.fft %0, type = FFT, length = [3, 8] : (tensor<3x8xcomplex<f32>>) -> tensor<3x8xcomplex<f32>>
    return %1 : tensor<3x8xcomplex<f32>>
  }
}
