"""``packsvm.delay``: the spec of --delay, its draws (stateless, the same on every rank) and the
busy-wait that spends them."""
import pickle
import time

import numpy as np
import pytest

from ppack.packsvm.delay import Delay, spend


@pytest.mark.parametrize("text,expected", [
    ("mean=2ms", Delay(0.002)),
    ("mean=500us", Delay(0.0005)),
    ("mean=0.002s", Delay(0.002)),
    ("mean=10%", Delay(0.1, relative=True)),
    ("mean=1e-3s,fixed", Delay(0.001, shape="fixed")),
    ("uniform, mean=2ms", Delay(0.002)),
    ("mean=2ms,ranks=all", Delay(0.002)),
    ("mean=2ms,ranks=one,seed=7", Delay(0.002, ranks="one", seed=7)),
    ("mean=2ms,ranks=3+1", Delay(0.002, ranks=(1, 3))),
    ("MEAN=2MS,Fixed,ranks=ONE", Delay(0.002, shape="fixed", ranks="one")),
])
def test_every_form_of_the_spec_parses(text, expected):
    assert Delay.parse(text) == expected


@pytest.mark.parametrize("text,problem", [
    ("", "'': not an item of a delay"),
    ("fixed", "no mean in 'fixed'"),
    ("mean=2", "mean=2: not seconds with a unit or a percentage"),
    ("mean=-1ms", "mean=-1ms: not seconds"),
    ("mean=2ms,mean=3ms", "'mean=3ms' repeats mean"),
    ("mean=2ms,fixed,uniform", "'uniform' repeats shape"),
    ("mean=2ms,ranks=two", "ranks=two: not all, one or ranks joined by +"),
    ("mean=2ms,seed=-1", "seed=-1: not an integer"),
    ("mean=2ms,slow", "'slow': not an item of a delay"),
])
def test_a_bad_spec_is_one_line_naming_the_problem_and_the_form(text, problem):
    with pytest.raises(ValueError) as info:
        Delay.parse(text)
    message = str(info.value)
    assert message.startswith(problem) and "\n" not in message
    assert "expected mean=X[,uniform|fixed][,ranks=all|one|R+R...][,seed=N]" in message


def test_draws_are_a_function_of_seed_pack_and_rank():
    """The same numbers from another object (another rank, a later run, a pickled copy), in any
    order; another seed gives others; a fixed delay is the mean itself."""
    one, two = Delay.parse("mean=2ms,seed=3"), Delay.parse("mean=2ms,seed=3")
    forward = [one.seconds(p, r, 0.0) for p in range(50) for r in range(3)]
    backward = [two.seconds(p, r, 0.0) for p in reversed(range(50)) for r in reversed(range(3))][::-1]
    assert forward == backward == [pickle.loads(pickle.dumps(one)).seconds(p, r, 0.0)
                                   for p in range(50) for r in range(3)]
    assert len(set(forward)) == len(forward) and all(0.0 <= s < 0.004 for s in forward)
    assert forward != [Delay.parse("mean=2ms,seed=4").seconds(p, r, 0.0) for p in range(50) for r in range(3)]
    assert {Delay.parse("mean=2ms,fixed").seconds(p, 1, 0.0) for p in range(10)} == {0.002}


def test_a_relative_mean_scales_with_the_ranks_own_sums():
    delay = Delay.parse("mean=10%,fixed")
    assert delay.seconds(0, 0, 0.5) == pytest.approx(0.05) and delay.seconds(0, 0, 0.0) == 0.0
    uniform = Delay.parse("mean=10%")
    assert uniform.seconds(5, 1, 2.0) == pytest.approx(2 * uniform.seconds(5, 1, 1.0))


def test_ranks_one_delays_one_rank_a_pack_the_same_on_every_rank():
    delay = Delay.parse("mean=1ms,fixed,ranks=one,seed=2").for_ranks(4)
    chosen = []
    for pack in range(400):
        delayed = [r for r in range(4) if delay.seconds(pack, r, 0.0) > 0]  # as each rank computes it
        assert delayed == [delay.chosen_rank(pack)]
        chosen.append(delayed[0])
    assert set(chosen) == {0, 1, 2, 3}  # each rank about a quarter of the time
    assert chosen == [Delay.parse("mean=1ms,ranks=one,seed=2").for_ranks(4).chosen_rank(p) for p in range(400)]
    with pytest.raises(ValueError, match="number of ranks is not known"):
        Delay.parse("mean=1ms,ranks=one").seconds(0, 0, 0.0)


def test_listed_ranks_only_and_only_ranks_that_exist():
    delay = Delay.parse("mean=1ms,ranks=1+3")
    assert [delay.seconds(0, r, 0.0) > 0 for r in range(4)] == [False, True, False, True]
    assert delay.for_ranks(4).ranks == (1, 3)
    with pytest.raises(ValueError, match=r"^delay ranks=1\+3: rank 3 is not among the ranks, 0 to 1$"):
        delay.for_ranks(2)


def test_uniform_draws_have_the_asked_mean():
    """2000 draws uniform on [0, 4 ms]: their mean's standard error is 1.15 ms / sqrt(2000) =
    0.026 ms, so 10% (0.2 ms) is 8 standard errors."""
    delay = Delay.parse("mean=2ms,seed=11")
    draws = np.array([delay.seconds(pack, pack % 2, 0.0) for pack in range(2000)])
    assert draws.mean() == pytest.approx(0.002, rel=0.1)
    assert draws.min() >= 0.0 and draws.max() < 0.004


def test_describe_says_the_spec_in_words():
    assert Delay.parse("mean=10%,seed=1").describe() == "uniform, mean 10% of the sums, every rank, seed 1"
    assert Delay.parse("mean=2ms,fixed,ranks=one").describe() == "fixed, mean 2 ms, one rank a pack, seed 0"
    assert Delay.parse("mean=500us,ranks=1+3").describe() == "uniform, mean 500 us, ranks 1+3, seed 0"


def test_spend_waits_at_least_the_time_asked_and_calls_between():
    calls = []
    start = time.perf_counter()
    spend(0.02, between=lambda: calls.append(time.perf_counter()), every=1e-3)
    assert time.perf_counter() - start >= 0.02
    assert len(calls) >= 2  # at once, then about every millisecond
    start = time.perf_counter()
    spend(0.005)
    assert time.perf_counter() - start >= 0.005
    spend(0.0, between=lambda: calls.append(None))  # nothing to wait: nothing called
    assert None not in calls
