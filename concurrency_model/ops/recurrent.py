"""RNN, LSTM and GRU layers unrolled over time (paper §4 and §5.4; cells as in PyTorch's nn.RNN/LSTM/GRU).

Each step computes ``gates = W_ih x_t + b_ih + W_hh h_{t-1} + b_hh`` (G gate blocks of H: RNN 1, GRU 3,
LSTM 4) and an element-wise cell. The input projections of all steps are independent and run side by
side; the hidden projection and the cell are on the recurrence, so depth grows linearly with the
sequence length T (paper §5.4 [D]: D = O(T (log(C_in + C_h) + 1))). With L stacked layers the longest
path makes T - 1 moves along time and L - 1 up the stack: ``D = D_in + (L-1) D_up + (T-1) D_rec +
(T+L-1) D_cell``. h_0 and c_0 are given (no projection on the first step's critical path beyond the input).

Cell element-wise ops per hidden unit (sigmoid 4, tanh 1, as in ``elementwise``):
RNN: tanh (1, depth 1). LSTM: 3 sigmoids, tanh(g), c = f c + i g (3), tanh(c), o tanh(c): 18, depth 8.
GRU: 2 sigmoids, r ⊙ (W_hn h + b_hn), + , tanh, (1-z) ⊙ n + z ⊙ h (4): 15, depth 9.
Backward (BPTT) doubles the matrix products (∇x/∇h and ∇W) and costs about 1.5x the cell ops [D].
"""
from __future__ import annotations

from ..cost import Cost, OpCost, clog2
from . import checks

CELLS = {"rnn": (1, 1, 1), "lstm": (4, 18, 8), "gru": (3, 15, 9)}  # gates, cell ops per unit, cell depth


def recurrent(cell: str, seq_len, batch, input_size, hidden, layers: int = 1, bias: bool = True,
              value_bytes=4) -> OpCost:
    """A stacked, unidirectional recurrent layer over ``seq_len`` steps.

    >>> r = recurrent("lstm", 10, 1, 8, 8)
    >>> int(r.params) == 4 * 8 * (8 + 8) + 2 * 4 * 8
    True
    >>> recurrent("rnn", 20, 1, 4, 4).forward.depth - recurrent("rnn", 10, 1, 4, 4).forward.depth
    60
    """
    cell = checks.choice("cell", cell, CELLS)
    T, n = checks.size("seq_len", seq_len), checks.size("batch", batch)
    i0, h, L = checks.size("input_size", input_size), checks.size("hidden", hidden), checks.size("layers", layers)
    vb = checks.value_bytes(value_bytes)
    g, cell_ops, cell_depth = CELLS[cell]
    nb = 2 if bias else 0
    inputs = [i0] + [h] * (int(L) - 1)
    params = sum(g * h * (i + h) + nb * g * h for i in inputs)
    macs = sum(T * n * g * h * (i + h) for i in inputs)
    # cell ops + adding the two projections of every gate; GRU's cell ops already count the add of
    # W_in x to r ⊙ (W_hn h + b_hn), so its n gate needs no separate one
    elementwise = L * T * n * h * (cell_ops + g - (1 if cell == "gru" else 0))
    bias_adds = L * T * n * g * h * nb
    d_in = 1 + clog2(i0) + 1
    d_up = 1 + clog2(h) + 1
    d_rec = 1 + clog2(h) + 1
    d_cell = 1 + cell_depth
    depth = d_in + (L - 1) * d_up + (T - 1) * d_rec + (T + L - 1) * d_cell
    x_el, y_el = T * n * i0, T * n * h
    fwd = Cost(flop=2 * macs + elementwise + bias_adds, depth=depth, macs=macs,
               bytes=vb * (x_el + params + y_el), params=params,
               act_bytes=vb * (x_el + L * T * n * h * (g + 2)))  # inputs, gates, h and c per step
    # BPTT: ∇h flows back along the same recurrence; ∇W sums over batch and time
    gin = Cost(flop=2 * macs + elementwise * 3 // 2, depth=depth + L * T, macs=macs,
               bytes=vb * (y_el + params + x_el + L * T * n * h * (g + 2)))
    gw = Cost(flop=2 * macs + L * T * n * g * h * nb // 2, depth=1 + clog2(n * T), macs=macs,
              bytes=vb * (x_el + y_el + params))
    return OpCost(cell, fwd, gin, gw, "paper §4, §5.4; PyTorch nn.RNN/LSTM/GRU equations")
