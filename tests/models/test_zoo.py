"""The zoo against torchvision's published parameter counts and GFLOPS (multiply-adds at 224x224, batch 1).

Sources: torchvision model documentation ("Table of all available classification weights": params,
GFLOPS), https://pytorch.org/vision/stable/models.html; GPT-3: Brown et al. 2020 Table 2.1;
BERT: Hugging Face bert-base-uncased / bert-large-uncased parameter counts; Zaremba et al. 2014.
"""
import pytest
import sympy as sp

from concurrency_model import get_model
from concurrency_model.models import NAMES
from concurrency_model.symbols import N

TORCHVISION = {  # name: (parameters, GFLOPS = multiply-adds / 1e9)
    "resnet50": (25_557_032, 4.09),
    "vgg16": (138_357_544, 15.47),
    "alexnet": (61_100_840, 0.71),
    "googlenet": (6_624_904, 1.50),
    "densenet121": (7_978_856, 2.83),
    "mobilenet_v2": (3_504_872, 0.30),
    "resnet152": (60_192_808, 11.51),
    "resnext50_32x4d": (25_028_904, 4.23),
    "vit_b_16": (86_567_656, 17.56),
}


@pytest.mark.parametrize("name", sorted(TORCHVISION))
def test_torchvision_params_exact_and_macs_within_3pct(name):
    params, gmacs = TORCHVISION[name]
    g = get_model(name, batch=1)
    assert g.params == params
    assert abs(float(g.forward_macs()) / 1e9 / gmacs - 1) <= 0.03


@pytest.mark.parametrize("name, params", [
    ("resnet101", 44_549_160),  # torchvision docs
    ("resnext101_32x4d", 44_177_704),  # timm resnext101_32x4d (44.18M); DeepLearningExamples' ResNeXt-101
    # the same plus one SE module (reduction 16) a block: 2 C^2/16 + C/16 + C per block of C output channels
    ("se_resnext101_32x4d", 44_177_704 + sum(n * (2 * c * c // 16 + c // 16 + c)
                                             for n, c in ((3, 256), (4, 512), (23, 1024), (3, 2048)))),
    ("gpt2", 124_439_808),  # Hugging Face gpt2 (tied lm_head)
    ("bert-base", 109_482_240),  # bert-base-uncased with pooler
    ("bert-large", 335_141_888),  # bert-large-uncased with pooler
    ("lstm-lm", 66_034_000),  # Zaremba et al. 2014 "large": 66M
])
def test_other_zoo_params(name, params):
    assert get_model(name).params == params


def test_bert_pretraining_heads():
    # Hugging Face BertForPreTraining (bert-large-uncased): BertModel + MLM transform (1024 x 1024 + 1024),
    # its layer norm (2 x 1024), the decoder's bias (30522; its weight is the tied token embedding) and
    # the next-sentence classifier (1024 x 2 + 2)
    g = get_model({"name": "bert-large", "seq_len": 128, "head": "pretraining"}, batch=2)
    assert g.params == 335_141_888 + 1_049_600 + 2_048 + 30_522 + 2_050 == 336_226_108
    head = g.nodes["lm_head"]
    assert head.shape == (128, 30522)
    # the decoder on every position: 2 x tokens x 1024 x 30522 FLOP plus its bias add
    assert head.cost.forward.flop == 2 * 256 * 1024 * 30522 + 256 * 30522
    with pytest.raises(ValueError, match="model.head: unknown 'mlm'"):
        get_model({"name": "bert-large", "head": "mlm"})
    with pytest.raises(ValueError, match="model: bad field for 'gpt2'.*'head'"):  # not a TypeError
        get_model({"name": "gpt2", "head": "pretraining"})


def test_inception_v3_is_torchvision_without_the_auxiliary_classifier():
    # torchvision inception_v3: 27,161,264 parameters with its auxiliary classifier, 5.71 GFLOPS
    # (multiply-adds at 299x299; the auxiliary head runs in training only). The head: a 1x1 conv
    # 768 -> 128 with batch norm (98,304 + 256), a 5x5 conv 128 -> 768 with batch norm
    # (2,457,600 + 1,536) and a 768 -> 1000 linear layer (769,000): 3,326,696
    g = get_model("inception_v3", batch=1)
    assert g.params == 27_161_264 - 3_326_696
    assert abs(float(g.forward_macs()) / 1e9 / 5.71 - 1) <= 0.03
    shapes = {name: node.shape for name, node in g.nodes.items()}
    assert shapes["fc"] == (1000,)
    assert shapes["Mixed_5d.concat"] == (288, 35, 35) and shapes["Mixed_6e.concat"] == (768, 17, 17)
    assert shapes["Mixed_7c.concat"] == (2048, 8, 8)
    assert get_model({"name": "inception_v3", "image_size": 75}).params == g.params  # the smallest input
    with pytest.raises(ValueError, match=r"^model.image_size: inception_v3 cannot take 74x74 inputs \(it needs at "
                                         r"least 75x75\)"):
        get_model({"name": "inception_v3", "image_size": 74})
    with pytest.raises(ValueError, match=r"^model.image_size: alexnet cannot take 32x32 inputs \(kh: kernel extent"):
        get_model({"name": "alexnet", "image_size": 32})
    for bad in ("x", 0, 64.0):  # was: 0 silently took the default 224, "x" a bare int() error
        with pytest.raises(ValueError, match="^model.image_size: must be a positive integer"):
            get_model({"name": "resnet50", "image_size": bad})


def test_gpt3_175b():
    g = get_model("gpt3-175b")
    assert abs(g.params / 174.6e9 - 1) < 0.001
    # forward GEMM FLOP per sequence, Narayanan et al. 2021 App.: 24 l s h^2 + 4 l s^2 h per layer stack
    # plus the logit layer 2 s h V (their 96 B s l h^2 (1 + s/6h + V/16lh) is 4 such passes, 3 for V)
    l, s, h, V = 96, 2048, 12288, 50257
    expected = 24 * l * s * h**2 + 4 * l * s**2 * h + 2 * s * h * V
    assert float(2 * g.forward_macs()) == pytest.approx(expected, rel=1e-9)


def test_every_name_builds_with_positive_work_and_depth():
    for name in NAMES:
        g = get_model(name)
        f = g.forward()
        assert f.flop > f.depth > 0, name


def test_lenet5_against_paper_appendix_a():
    """Appendix A gives LeNet W = 665,832 and D = 41 [S1]; see the lenet5 docstring for why ours differ.

    Hand count, batch 1: conv MACs 28*28*6*25 + 10*10*16*6*25 + 120*16*25 = 405,600; FC 120*84 + 84*10.
    Depth: c1 1+0+3+3+1, tanh 1, s2 1+1+1, tanh 1, c3 1+3+3+3+1, tanh 1, s4 3, tanh 1, c5 1+4+3+3+1,
    tanh 1, f6 1+7+1, tanh 1, output 1+7+1 = 61.
    """
    g = get_model("lenet5")
    assert g.params == 61_706
    assert g.forward_macs() == 405_600 + 120 * 84 + 84 * 10
    assert g.depth() == 61
    # the paper's W lies between one operation and two per multiply-add of our network
    assert g.forward_macs() < 665_832 < g.forward_flop()


def test_symbolic_batch_matches_numeric():
    g_sym, g4 = get_model("resnet50", batch=N), get_model("resnet50", batch=4)
    assert g_sym.forward_flop().subs(N, 4) == g4.forward_flop()
    assert g_sym.training("adam").flop.subs(N, 4) == g4.training("adam").flop
    assert sp.simplify(g_sym.depth().subs(N, 4) - g4.depth()) == 0


def test_training_is_about_three_forwards():
    # backward = grad-input + grad-weight, each about a forward (Kaplan et al. 2020, C = 6 N D)
    for name in ("resnet50", "gpt2", "vit_b_16"):
        g = get_model(name, batch=8)
        ratio = float(g.training().flop / g.forward_flop())
        assert 2.7 < ratio < 3.1, (name, ratio)


def test_family_spec_and_errors():
    g = get_model({"kind": "gpt", "layers": 2, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 100})
    # per layer 12h^2 + 13h, embeddings V h + s h, final LN 2h (Narayanan et al. 2021 App. param count)
    h = 64
    assert g.params == 2 * (12 * h * h + 13 * h) + 100 * h + 32 * h + 2 * h
    assert get_model({"name": "resnet50", "image_size": 128}).params == 25_557_032
    with pytest.raises(ValueError, match="model"):
        get_model("no-such-network")
    with pytest.raises(ValueError, match="heads"):
        get_model({"kind": "gpt", "layers": 2, "hidden": 64, "heads": 5, "seq_len": 32, "vocab": 100})
    with pytest.raises(ValueError, match="layers"):
        get_model({"kind": "gpt", "layers": 0, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 100})
    with pytest.raises(ValueError, match="kh"):
        get_model("alexnet", image_size=8)
    with pytest.raises(ValueError, match="image_size"):
        get_model("gpt2", image_size=224)


def test_a_graph_is_built_once_unless_its_source_can_change(tmp_path):
    """get_model keeps the graphs it built (a serving sweep asks for the same few hundreds of times) only where
    nothing can change between calls: not for a config file on disk, nor for a symbolic batch."""
    import json
    spec = {"kind": "gpt", "layers": 2, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 100}
    a = get_model(spec, batch=2)
    assert get_model(dict(reversed(spec.items())), batch=2) is a  # the same spec, its keys in another order
    assert get_model(spec, batch=3) is not a
    assert get_model("lenet5", batch=N) is not get_model("lenet5", batch=N)
    cfg = {"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "n_positions": 32, "vocab_size": 100}
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    small = get_model({"hf_config": str(f)}).params
    f.write_text(json.dumps({**cfg, "n_layer": 3}))  # the file changed: the graph is built from it again
    assert get_model({"hf_config": str(f)}).params > small


@pytest.mark.parametrize("spec, message", [
    ({"kind": "bert", "layers": -1}, r"^model.layers: must be an integer in \[1, 10000\], got -1"),  # was 0 layers, silently
    ({"kind": "bert", "max_positions": "a"}, "^model.max_positions: must be a positive integer"),
    ({"kind": "gpt", "layers": 10**9}, r"^model.layers: must be an integer in \[1, 10000\]"),  # was hours of building
    ({"kind": "mlp", "inputs": 3, "outputs": 2, "layers": 10**7}, r"^model.layers: must be an integer in \[0, 10000\]"),
])
def test_family_sizes_are_checked(spec, message):
    with pytest.raises(ValueError, match=message):
        get_model(spec)


class _BuildEveryBlock:
    """A stand-in for Builder.repeated that builds every block (what the stack was before the blocks were copied)."""

    @staticmethod
    def repeated(self, scope, x, build, key):
        with self.scope(scope):
            return build(x)


def _nodes(g):
    return [(n.name, n.kind, n.inputs, n.shape, n.cost, sorted(n.attrs.items())) for n in g.nodes.values()]


@pytest.mark.parametrize("spec", [
    "gpt2", "bert-base", "vit_b_16", "resnet50", "se_resnext101_32x4d",
    {"kind": "bert", "layers": 3, "hidden": 64, "heads": 4, "seq_len": 32, "head": "pretraining"},
    {"hf_config": "mistral-7b", "seq_len": 256},
    {"hf_config": "gpt-oss-20b", "seq_len": 128},  # sinks, expert biases: a fresh OpCost a block
    {"hf_config": "deepseek-v3", "seq_len": 64},  # dense first layers, then MoE, MLA, multi-token prediction
])
def test_copied_blocks_equal_built_blocks(spec, monkeypatch):
    """A stack whose blocks are copied (Builder.repeated) has the nodes, inputs, shapes, costs, attributes and
    parameters of the stack built block by block, at a batch of 1 and of 3."""
    from concurrency_model.models import Builder
    rebuild = get_model(spec, batch=1).rebuild  # builds afresh (get_model keeps what it built)
    for batch in (1, 3):
        copied = rebuild(batch=batch, value_bytes=2)
        with monkeypatch.context() as m:
            m.setattr(Builder, "repeated", _BuildEveryBlock.repeated)
            built = rebuild(batch=batch, value_bytes=2)
        assert _nodes(copied) == _nodes(built)
        assert copied.params == built.params
