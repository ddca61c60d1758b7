"""Recurrent language model of the zoo: Zaremba, Sutskever & Vinyals 2014 ("large": 2 LSTM layers of
1500 units, vocabulary 10,000, unrolled 35 steps; 66M parameters)."""
from __future__ import annotations

from .builder import Builder


def lstm_lm(b: Builder, layers=2, hidden=1500, vocab=10000, seq_len=35) -> str:
    x = b.input((seq_len,), name="tokens")
    x = b.dropout(b.embedding(x, vocab, hidden))
    x = b.dropout(b.recurrent(x, "lstm", hidden, layers, name="lstm"))
    x = b.linear(x, vocab, name="decoder")
    return b.softmax(x)
