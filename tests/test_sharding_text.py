"""Shardings, replica groups and source-target pairs: parsed into structured values, printed
back in the form they were written, and verified against the module's device counts."""

import numpy as np
import pytest

from minixla import HloParseError, VerificationError, parse_hlo_module
from minixla.ir.sharding import HloSharding, parse_replica_groups, parse_sharding, participants

SHARDINGS = [
    "{replicated}",
    "{maximal device=0}",
    "{manual}",
    "{unknown}",
    "{devices=[4,1,2]<=[8] last_tile_dim_replicate}",
    "{devices=[2,2]0,2,1,3}",
    "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
    "{devices=[2,1,2]<=[4] last_tile_dims={manual}}",
    "{devices=[2,1,2,2]<=[8] last_tile_dims={manual, replicated}}",
    "{{replicated}, {devices=[2]0,1}}",
    '{replicated metadata={op_name="a"}}',
]


@pytest.mark.parametrize("text", SHARDINGS)
def test_sharding_prints_back_as_written(text):
    assert str(parse_sharding(text)) == text


def test_tile_assignment_devices_follow_the_iota_transpose():
    sharding = parse_sharding("{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}")
    assert sharding.tile_dims == (2, 1)
    assert sharding.tile.devices().reshape(-1).tolist() == [0, 2, 1, 3]
    assert sharding.tile_index(2) == (0, 0) and sharding.tile_index(1) == (1, 0)
    assert sharding.shard_dims((16, 4)) == (8, 4)
    assert sharding.shard_bounds((16, 4), 3) == ((8, 16), (0, 4))


def test_uneven_tiles_round_up_and_clip():
    sharding = parse_sharding("{devices=[4]<=[4]}")
    assert sharding.shard_dims((10,)) == (3,)
    assert [sharding.shard_bounds((10,), d) for d in range(4)] == [
        ((0, 3),),
        ((3, 6),),
        ((6, 9),),
        ((9, 10),),
    ]


def test_a_grid_of_ones_normalizes_to_replicated():
    assert HloSharding.tiled(np.arange(2).reshape(1, 2), ("replicated",)).is_replicated
    assert str(HloSharding.tiled((2, 1))) == "{devices=[2,1]<=[2]}"


@pytest.mark.parametrize(
    "text, groups",
    [
        ("{{0,1},{2,3}}", ((0, 1), (2, 3))),
        ("{}", ()),
        ("[4,2]<=[8]", ((0, 1), (2, 3), (4, 5), (6, 7))),
        ("[2,4]<=[4,2]T(1,0)", ((0, 2, 4, 6), (1, 3, 5, 7))),
        ("mesh['axis_0'=4,'axis_1'=1,'axis_2'=2] {'axis_0'}", ((0, 2, 4, 6), (1, 3, 5, 7))),
        ("mesh['a'=2,'b'=2] {'b'}", ((0, 1), (2, 3))),
        ("mesh['a'=2,'b'=3] {'b','a'}", ((0, 3, 1, 4, 2, 5),)),
    ],
)
def test_replica_groups_in_every_form(text, groups):
    parsed = parse_replica_groups(text)
    assert parsed.groups == groups
    assert str(parsed) == text


MODULE = """HloModule m, num_partitions=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  p = f32[4,8]{1,0} parameter(0), sharding={devices=[2,2]<=[4]}
  ar = f32[4,8]{1,0} all-reduce(p), channel_id=1, replica_groups=[2,2]<=[4], use_global_device_ids=true, to_apply=add
  ag = f32[8,8]{1,0} all-gather(ar), channel_id=2, replica_groups=mesh['x'=2,'y'=2] {'x'}, dimensions={0}, use_global_device_ids=true
  ROOT cp = f32[8,8]{1,0} collective-permute(ag), channel_id=3, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
}
"""


def test_a_module_round_trips_with_structured_attributes():
    module = parse_hlo_module(MODULE)
    text = module.to_text()
    for fragment in (
        "sharding={devices=[2,2]<=[4]}",
        "replica_groups=[2,2]<=[4]",
        "replica_groups=mesh['x'=2,'y'=2] {'x'}",
        "source_target_pairs={{0,1},{1,2},{2,3},{3,0}}",
    ):
        assert fragment in text
    assert parse_hlo_module(text).to_text() == text
    ag = next(i for i in module.entry.instructions if i.opcode == "all-gather")
    assert ag.attrs["replica_groups"].groups == ((0, 2), (1, 3))
    assert participants(ag, 3, 1, 4) == (1, 3)


def test_group_modes_pick_the_participants():
    module = parse_hlo_module("""HloModule m, replica_count=2, num_partitions=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[2] parameter(0)
  r = f32[2] all-reduce(p), replica_groups={}, to_apply=add
  rp = f32[2] all-reduce(r), channel_id=1, replica_groups={{0},{1}}, to_apply=add
  ROOT pa = f32[2] all-to-all(rp), channel_id=2, replica_groups={{0,1}}, dimensions={0}
}""")
    by_name = {i.name: i for i in module.entry.instructions}
    # device = replica * 2 + partition
    assert participants(by_name["r"], 1, 2, 2) == (1, 3)  # the replicas of partition 1
    assert participants(by_name["rp"], 2, 2, 2) == (2, 3)  # both partitions of replica 1
    assert participants(by_name["pa"], 2, 2, 2) == (2, 3)  # the partitions of replica 1


def test_tile_count_must_match_num_partitions():
    text = MODULE.replace("num_partitions=4", "num_partitions=8")
    with pytest.raises(VerificationError, match=r"%p = .*spans 4 devices.*runs on 8"):
        parse_hlo_module(text)


def test_replica_groups_must_cover_the_devices():
    text = MODULE.replace("replica_groups=[2,2]<=[4]", "replica_groups={{0,1},{2}}")
    with pytest.raises(VerificationError, match=r"%ar = .*do not cover participants \[3\]"):
        parse_hlo_module(text)


def test_sharding_rank_must_match_the_shape():
    text = MODULE.replace("sharding={devices=[2,2]<=[4]}", "sharding={devices=[4]<=[4]}")
    with pytest.raises(VerificationError, match="tiles 1 dims of a rank 2 array"):
        parse_hlo_module(text)


@pytest.mark.parametrize(
    "bad, message",
    [
        ("sharding={devices=[2,2]0,1,2}", "needs 4 device ids"),
        ("sharding={tiles=[2]}", "unknown sharding"),
        ("sharding={devices=[2,2]<=[4] last_tile_dims={sideways}}", "unknown last_tile_dims"),
    ],
)
def test_malformed_shardings_are_parse_errors_at_the_value(bad, message):
    text = MODULE.replace("sharding={devices=[2,2]<=[4]}", bad)
    with pytest.raises(HloParseError, match=message) as info:
        parse_hlo_module(text)
    assert info.value.line == 10
