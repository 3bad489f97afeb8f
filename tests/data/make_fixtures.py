#!/usr/bin/python3
"""Regenerate the torch.save fixtures of tests/test_formats.c.

Run once with the system Python that has PyTorch 1.13:
    /usr/bin/python3 tests/data/make_fixtures.py tests/data
The outputs are committed; the tests never run this script.
"""
import io
import os
import sys

import torch


def tiny_state():
    g = torch.Generator().manual_seed(1)
    base = torch.randn(6, 4, generator=g)
    return {
        "w_f32": base,
        # A view shares base's storage: the archive holds one record for both.
        "w_f32_view": base[2:4],
        "w_bf16": torch.randn(3, 5, generator=g).to(torch.bfloat16),
        "w_f16": torch.randn(7, generator=g).to(torch.float16),
        "w_f64": torch.randn(2, 3, generator=g).to(torch.float64),
        "step_i64": torch.arange(5, dtype=torch.int64),
        "scalar_f32": torch.tensor(1.5),
        "empty_f32": torch.zeros(0),
        "mask_bool": torch.tensor([True, False, True]),
    }


def tiny_optim():
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(8, 4)
    for _ in range(2):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    return opt.state_dict()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__)
    # Saved through a path: the archive's top directory is the file stem.
    torch.save(tiny_state(), os.path.join(out, "tiny_state.pt"))
    # Saved through a buffer: the top directory is "archive".
    buf = io.BytesIO()
    torch.save(tiny_optim(), buf)
    with open(os.path.join(out, "tiny_optim.pt"), "wb") as f:
        f.write(buf.getvalue())
    # Protocol 5 exercises FRAME, MEMOIZE and STACK_GLOBAL in data.pkl.
    g = torch.Generator().manual_seed(3)
    torch.save({"a": torch.randn(3, generator=g).to(torch.float16),
                "b": torch.arange(4, dtype=torch.int32)},
               os.path.join(out, "tiny_p5.pt"), pickle_protocol=5)


if __name__ == "__main__":
    main()
