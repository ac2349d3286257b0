"""Random fusions of integer, boolean and 8-bit float values for the differential fuzzer, generated as
Python source (a failing case prints itself as a standalone reproducer).

A case has 1-3 inputs of one shape (layouts as fuzz_fusions draws them) among int8, uint8, int16, int32,
int64, bool, and bfloat16/float16/float32 holding small integers and halves; then 2-7 ops that keep
each value's kind in mind: integer arithmetic (wrapping in narrow types), C division and remainders
by divisors made nonzero, Python's remainder, bitwise ops and shifts by small amounts, comparisons,
where, casts between integer widths and from floats (in range), rounding ops on halves, and float8
round trips (e4m3fn and e5m2; e4m3fn past its largest finite value too); integer sums, maxima and minima
over a dim now and then as outputs. Integers and booleans are compared exactly, and every element is
compared: the source sets `exact`, so the fuzzer's screen of ill-conditioned elements (which a half nudged
by an ulp would fail) stays off.
"""

from __future__ import annotations

import random

from fuzz_fusions import LAYOUTS, SIZES, _input_source

# (numpy dtype, braze DataType, kind)
INPUT_TYPES = [("np.int8", "Int8", "int"), ("np.uint8", "UInt8", "int"), ("np.int16", "Int16", "int"),
               ("np.int32", "Int32", "int"), ("np.int32", "Int32", "int"), ("np.int64", "Int64", "int"),
               ("np.bool_", "Bool", "bool"), ("ml_dtypes.bfloat16", "BFloat16", "float"),
               ("np.float16", "Half", "float"), ("np.float32", "Float", "float")]
INT_TYPES = ["Int8", "UInt8", "Int16", "Int32", "Int64"]
INT_BINARY = ["add", "sub", "mul", "bitwise_and", "bitwise_or", "bitwise_xor", "maximum", "minimum"]
DIVISIONS = ["div", "fmod", "remainder"]
COMPARISONS = ["lt", "le", "gt", "ge", "eq", "ne"]


def _input(lines: list[str], i: int, shape: list[int], kind: tuple[str, str, str], layout: str,
           rng: random.Random) -> None:
    """x{i} in `layout`: small integers (0-80 for uint8), booleans, or floats that are multiples of a half in
    [-4, 4]. The values are made from fuzz_fusions' uniform draw before its layout is applied."""
    if kind[2] == "bool":
        values = ".__gt__(0)"
    elif kind[2] == "float":
        values = f".__mul__(4).round().__truediv__(2).astype({kind[0]})"
    elif kind[0] == "np.uint8":
        values = ".__mul__(20).__add__(40).round().astype(np.uint8)"
    else:
        values = f".__mul__(20).round().astype({kind[0]})"
    lines += [line.replace(".astype(np.float64)", values) for line in
              _input_source(i, shape, "np.float64", layout, rng)]


def _pair(rng: random.Random, pool: list[str]) -> tuple[str, str]:
    """Two operands, distinct where the pool has two (x - x, x / x and x < x are constants)."""
    a = rng.choice(pool)
    return a, rng.choice([v for v in pool if v != a] or [a])


def _nonzero(v: str) -> str:
    return f"fd.ops.where(fd.ops.eq({v}, 0), 1, {v})"


def generate_integer(seed: int) -> str:
    """The source of one case: defines `fd` and `inputs`."""
    rng = random.Random(seed)
    rank = rng.randint(1, 3)
    shape = [rng.choice(SIZES) for _ in range(rank)]
    n_inputs = rng.randint(1, 3)
    kinds = [rng.choice(INPUT_TYPES) for _ in range(n_inputs)]
    lines = ["import ml_dtypes", "import numpy as np", "from braze import DataType, FusionDefinition", ""]
    for i, kind in enumerate(kinds):
        _input(lines, i, shape, kind, rng.choice(LAYOUTS), rng)
    lines.append(f"inputs = [{', '.join(f'x{i}' for i in range(n_inputs))}]")
    lines.append("exact = True  # every element compared (no screen of ill-conditioned ones)")
    lines.append("with FusionDefinition() as fd:")
    body = []
    live: dict[str, str] = {}  # value -> kind
    for i, kind in enumerate(kinds):
        body.append(f"t{i} = fd.define_tensor(sizes=list(x{i}.shape), strides=[s // x{i}.itemsize for s in x{i}.strides], "
                    f"dtype=DataType.{kind[1]})")
        live[f"t{i}"] = kind[2]
    outputs = []
    for n in range(rng.randint(2, 7)):
        name = f"v{n}"
        of = {k: [v for v, kv in live.items() if kv == k] for k in ("int", "bool", "float")}
        choice = rng.random()
        if of["int"] and choice < 0.3:
            a, b = _pair(rng, of["int"])
            body.append(f"{name} = fd.ops.{rng.choice(INT_BINARY)}({a}, {b})")
            live[name] = "int"
        elif of["int"] and choice < 0.4:
            a, b = _pair(rng, of["int"])
            body.append(f"{name} = fd.ops.{rng.choice(DIVISIONS)}({a}, {_nonzero(b)})")
            live[name] = "int"
        elif of["int"] and choice < 0.45:
            a, b = _pair(rng, of["int"])
            if rng.random() < 0.5:
                body.append(f"{name} = fd.ops.bitwise_left_shift(fd.ops.bitwise_and({a}, 15), fd.ops.bitwise_and({b}, 3))")
            else:
                body.append(f"{name} = fd.ops.bitwise_right_shift({a}, fd.ops.bitwise_and({b}, 3))")
            live[name] = "int"
        elif of["int"] and choice < 0.55:
            a = rng.choice(of["int"])
            op = rng.choice(["abs", "neg", "sign", "bitwise_not", "cast"])
            if op == "cast":
                body.append(f"{name} = fd.ops.cast({a}, DataType.{rng.choice(INT_TYPES)})")
            else:
                body.append(f"{name} = fd.ops.{op}({a})")
            live[name] = "int"
        elif choice < 0.65:
            pool = of["int"] + of["float"]
            if not pool:
                continue
            a, b = _pair(rng, pool)
            body.append(f"{name} = fd.ops.{rng.choice(COMPARISONS)}({a}, {b})")
            live[name] = "bool"
        elif of["bool"] and choice < 0.75:
            c = rng.choice(of["bool"])
            others = [v for v in live if v != c] or [c]
            x, y = _pair(rng, others)
            if rng.random() < 0.3:
                body.append(f"{name} = fd.ops.logical_not({c})" if rng.random() < 0.5
                            else f"{name} = fd.ops.bitwise_xor({c}, {rng.choice(of['bool'])})")
                live[name] = "bool"
            else:
                body.append(f"{name} = fd.ops.where({c}, {x}, {y})")
                live[name] = "float" if "float" in (live[x], live[y]) else "int" if "int" in (live[x], live[y]) else "bool"
        elif of["float"] and choice < 0.85:
            a = rng.choice(of["float"])
            op = rng.random()
            if op < 0.35:
                body.append(f"{name} = fd.ops.{rng.choice(['round', 'floor', 'ceil', 'trunc'])}({a})")
                live[name] = "float"
            elif op < 0.65:
                # Float to integer: in range (the values are at most a few hundred).
                body.append(f"{name} = fd.ops.cast(fd.ops.clamp({a}, -100.0, 100.0), DataType.{rng.choice(INT_TYPES[2:])})")
                live[name] = "int"
            else:
                # A float8 round trip, scaled now and then past e4m3fn's largest finite value (448).
                scale = rng.choice([1.0, 1.0, 37.5, 300.0])
                fp8 = rng.choice(["Float8_e4m3fn", "Float8_e5m2"])
                body.append(f"{name} = fd.ops.cast(fd.ops.cast(fd.ops.mul({a}, {scale}), DataType.{fp8}), DataType.Float)")
                live[name] = "float"
        elif of["int"] or of["bool"]:
            a = rng.choice(of["int"] + of["bool"])
            body.append(f"{name} = fd.ops.cast({a}, DataType.{rng.choice(['Float', 'BFloat16', 'Half'])})")
            live[name] = "float"
        else:
            continue
        if of["int"] and rank > 1 and rng.random() < 0.15:
            outputs.append(f"fd.ops.{rng.choice(['sum', 'max', 'min'])}({rng.choice(of['int'])}, dims=[{rng.randrange(rank)}])")
    computed = [v for v in live if v.startswith("v")]
    if not computed:
        body.append("v_last = fd.ops.bitwise_not(fd.ops.gt(t0, t0))")
        computed = ["v_last"]
    outputs = rng.sample(computed, min(len(computed), rng.randint(1, 2))) + outputs
    body += [f"fd.add_output({out})" for out in outputs]
    lines += ["    " + line for line in body]
    return "\n".join(lines) + "\n"
