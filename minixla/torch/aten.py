"""LOWERINGS: the one table from ATen op overloads to their minixla lowering rules.

Every op the FX graphs may hold after AOTAutograd and the core-ATen decompositions has one
entry here (rules live in aten_rules.py and aten_nn.py). An op missing from the table is a
TorchLoweringError naming it; `docs/torch.md` lists what is covered.
"""
from __future__ import annotations

import torch

from . import aten_nn as nn
from . import aten_rules as r

aten = torch.ops.aten

LOWERINGS = {
    # elementwise arithmetic
    aten.add.Tensor: r.add, aten.add.Scalar: r.add,
    aten.sub.Tensor: r.sub, aten.sub.Scalar: r.sub,
    aten.rsub.Scalar: lambda ctx, x, y, alpha=1: r.sub(ctx, y, x, alpha),
    aten.mul.Tensor: r.mul, aten.mul.Scalar: r.mul,
    aten.div.Tensor: r.div, aten.div.Scalar: r.div, aten.div.Tensor_mode: r.div,
    aten.neg.default: r.unary("negate"), aten.abs.default: r.unary("abs"),
    aten.exp.default: r.unary("exponential"), aten.expm1.default: r.unary("exponential-minus-one"),
    aten.log.default: r.unary("log"), aten.log1p.default: r.unary("log-plus-one"),
    aten.sqrt.default: r.unary("sqrt"), aten.rsqrt.default: r.unary("rsqrt"),
    aten.sin.default: r.unary("sine"), aten.cos.default: r.unary("cosine"),
    aten.tanh.default: r.unary("tanh"), aten.erf.default: r.unary("erf"),
    aten.floor.default: r.unary("floor"), aten.ceil.default: r.unary("ceil"),
    aten.round.default: r.unary("round-nearest-even"), aten.sign.default: r.unary("sign"),
    aten.sigmoid.default: r.sigmoid, aten.reciprocal.default: r.reciprocal,
    aten.relu.default: r.relu, aten.gelu.default: r.gelu,
    aten.leaky_relu.default: r.leaky_relu, aten.hardtanh.default: r.hardtanh,
    aten.elu.default: r.elu,
    aten.pow.Tensor_Scalar: r.pow_, aten.pow.Tensor_Tensor: r.pow_, aten.pow.Scalar: r.pow_,
    aten.maximum.default: r.binary("maximum"), aten.minimum.default: r.binary("minimum"),
    aten.atan2.default: r.binary("atan2"),
    aten.remainder.Tensor: r.remainder, aten.remainder.Scalar: r.remainder,
    aten.fmod.Tensor: r.binary("remainder"), aten.fmod.Scalar: r.binary("remainder"),
    aten.clamp.default: r.clamp, aten.clamp.Tensor: r.clamp,
    aten.threshold_backward.default: r.threshold_backward,
    # comparisons and logic
    aten.eq.Tensor: r.compare("EQ"), aten.eq.Scalar: r.compare("EQ"),
    aten.ne.Tensor: r.compare("NE"), aten.ne.Scalar: r.compare("NE"),
    aten.lt.Tensor: r.compare("LT"), aten.lt.Scalar: r.compare("LT"),
    aten.le.Tensor: r.compare("LE"), aten.le.Scalar: r.compare("LE"),
    aten.gt.Tensor: r.compare("GT"), aten.gt.Scalar: r.compare("GT"),
    aten.ge.Tensor: r.compare("GE"), aten.ge.Scalar: r.compare("GE"),
    aten.logical_and.default: r.logical("and"), aten.logical_or.default: r.logical("or"),
    aten.logical_xor.default: r.logical("xor"), aten.logical_not.default: r.logical_not,
    aten.bitwise_and.Tensor: r.binary("and"), aten.bitwise_or.Tensor: r.binary("or"),
    aten.bitwise_xor.Tensor: r.binary("xor"), aten.bitwise_not.default: r.bitwise_not,
    aten.isnan.default: r.isnan,
    aten.where.self: r.where,
    # dtype and copies
    aten._to_copy.default: r.to_copy, aten.clone.default: r.copy, aten.alias.default: r.copy,
    aten.lift_fresh_copy.default: r.copy, aten.detach.default: r.copy,
    aten.copy.default: r.copy_into,
    # shape
    aten.view.default: r.view, aten._unsafe_view.default: r.view,
    aten.reshape.default: r.view, aten.squeeze.dims: r.view, aten.squeeze.dim: r.view,
    aten.squeeze.default: r.view, aten.unsqueeze.default: r.view,
    aten.permute.default: r.permute, aten.expand.default: r.expand,
    aten.slice.Tensor: r.slice_, aten.select.int: r.select, aten.cat.default: r.cat,
    aten.split_with_sizes.default: nn.split_with_sizes, aten.split.Tensor: nn.split,
    aten.unbind.int: nn.unbind, aten.repeat.default: r.repeat,
    aten.constant_pad_nd.default: r.constant_pad_nd, aten.flip.default: r.flip,
    # creation
    aten.full.default: r.full, aten.full_like.default: r.full_like,
    aten.scalar_tensor.default: r.scalar_tensor, aten.arange.start_step: r.arange,
    aten.arange.default: r.arange, aten.arange.start: r.arange,
    aten.empty.memory_format: r.empty, aten.zeros.default: r.empty,
    aten.empty_strided.default: r.empty, aten.new_empty.default: r.empty,
    aten.new_empty_strided.default: r.empty, aten.new_zeros.default: r.empty,
    aten.new_ones.default: lambda ctx, x, size, **_: r.full(ctx, size, 1),
    aten.new_full.default: lambda ctx, x, size, value, **_: r.full(ctx, size, value),
    # random
    aten.native_dropout.default: r.native_dropout,
    aten.native_dropout_backward.default: r.native_dropout_backward,
    aten.rand_like.default: r.rand_like, aten.rand.default: r.rand,
    aten.randn_like.default: r.randn, aten.randn.default: r.randn,
    # reductions
    aten.sum.dim_IntList: r.sum_, aten.sum.default: r.sum_,
    aten.mean.dim: r.mean, aten.mean.default: r.mean, aten.var.correction: r.var,
    aten.amax.default: r.amax, aten.amin.default: r.amin, aten.prod.dim_int: r.prod,
    aten.prod.default: r.prod, aten.any.dim: r.any_, aten.any.dims: r.any_,
    aten.any.default: r.any_, aten.all.dim: r.all_, aten.all.default: r.all_,
    aten.max.default: r.max_all, aten.min.default: r.min_all, aten.max.dim: r.max_dim,
    aten.min.dim: r.min_dim, aten.argmax.default: r.argmax, aten.argmin.default: r.argmin,
    aten.cumsum.default: nn.cumsum, aten.sort.default: nn.sort, aten.sort.stable: nn.sort_stable,
    aten.topk.default: nn.topk,
    aten._softmax.default: r.softmax, aten._log_softmax.default: r.log_softmax,
    aten._softmax_backward_data.default: r.softmax_backward,
    aten._log_softmax_backward_data.default: r.log_softmax_backward,
    # linear algebra, convolution, pooling
    aten.mm.default: nn.mm, aten.bmm.default: nn.bmm, aten.addmm.default: nn.addmm,
    aten.baddbmm.default: nn.baddbmm,
    aten.convolution.default: nn.convolution,
    aten.convolution_backward.default: nn.convolution_backward,
    aten.max_pool2d_with_indices.default: nn.max_pool_with_indices,
    aten.max_pool2d_with_indices_backward.default: nn.max_pool_backward,
    aten.avg_pool2d.default: nn.avg_pool,
    aten.avg_pool2d_backward.default: nn.avg_pool_backward,
    aten._adaptive_avg_pool2d.default: nn.adaptive_avg_pool,
    aten._adaptive_avg_pool2d_backward.default: nn.adaptive_avg_pool_backward,
    # normalization
    aten.native_layer_norm.default: nn.native_layer_norm,
    aten._native_batch_norm_legit_functional.default: nn.batch_norm_functional,
    aten._native_batch_norm_legit_no_training.default: nn.batch_norm_eval,
    aten._native_batch_norm_legit.no_stats: nn.batch_norm_no_stats,
    aten.native_group_norm.default: nn.native_group_norm,
    # indexing
    aten.index.Tensor: nn.index, aten.index_put.default: nn.index_put,
    aten.slice_scatter.default: nn.slice_scatter,
    aten.index_select.default: nn.index_select, aten.gather.default: nn.gather,
    aten.scatter.src: nn.scatter, aten.scatter.value: nn.scatter,
    aten.scatter_add.default: nn.scatter_add,
    aten.embedding.default: nn.embedding,
    aten.embedding_dense_backward.default: nn.embedding_dense_backward,
}
