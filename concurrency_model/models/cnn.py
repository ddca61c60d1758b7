"""Convolutional networks of the zoo, layer for layer as torchvision defines them (so that parameter
counts equal torchvision's), plus LeNet-5 as in LeCun et al. 1998.

Sources: torchvision/models/{alexnet,vgg,googlenet,resnet,densenet,mobilenetv2}.py (torchvision 0.15+);
LeCun, Bottou, Bengio & Haffner, "Gradient-based learning applied to document recognition", 1998, §II.B.
"""
from __future__ import annotations

from .builder import Builder


def lenet5(b: Builder, image_size: int = 32, classes: int = 10) -> str:
    """LeNet-5 (LeCun et al. 1998, §II.B): C1 6@5x5 -> S2 -> C3 16@5x5 -> S4 -> C5 120@5x5 -> F6 84 -> 10.

    Simplifications: C3 is fully connected to S2's 6 maps (the paper's connection table uses 60 of the
    96 map pairs: 1,516 instead of 2,416 parameters), the subsampling layers S2/S4 are 2x2 average pooling
    followed by tanh (the paper's trainable coefficient and bias are left out), and the Gaussian (RBF)
    output layer is a fully connected layer. This is the form of most modern re-implementations.

    Compared with the paper's Appendix A (Ben-Nun & Hoefler: W = 665,832, D = 41 [S1]), this network at
    batch 1 has W = 853,946 and D = 61 (``tests/models/test_zoo.py`` holds both). The paper's W lies between our
    multiply-add count (416,520: one operation per multiply-add) and our FLOP count (2 per multiply-add,
    plus bias adds, pooling and tanh): the appendix evidently counts differently, and LeCun's partial C3
    (60 of 96 map pairs, 150,000 instead of 240,000 multiply-adds) lowers it further. Our depth is larger
    because every weighted layer adds a multiply level and a bias add (+10 over five layers), tanh and
    pooling each add their own levels (+12), and reductions use one ceil(log2) tree per reduced
    dimension as Table 6 does. Without the paper's exact LeNet variant we cannot pin the rest down.
    """
    x = b.input((1, image_size, image_size))
    x = b.act(b.conv(x, 6, 5, name="c1"), "tanh")
    x = b.act(b.avgpool(x, 2, name="s2"), "tanh")
    x = b.act(b.conv(x, 16, 5, name="c3"), "tanh")
    x = b.act(b.avgpool(x, 2, name="s4"), "tanh")
    x = b.act(b.conv(x, 120, 5, name="c5"), "tanh")
    x = b.flatten(x)
    x = b.act(b.linear(x, 84, name="f6"), "tanh")
    return b.linear(x, classes, name="output")


def alexnet(b: Builder, image_size: int = 224, classes: int = 1000) -> str:
    """torchvision AlexNet (the one-GPU variant of Krizhevsky 2014)."""
    x = b.input((3, image_size, image_size))
    for i, (c, k, s, p, pool) in enumerate([(64, 11, 4, 2, True), (192, 5, 1, 2, True), (384, 3, 1, 1, False),
                                            (256, 3, 1, 1, False), (256, 3, 1, 1, True)]):
        x = b.relu(b.conv(x, c, k, s, p, name=f"features.conv{i}"))
        if pool:
            x = b.maxpool(x, 3, 2)
    x = b.flatten(b.adaptive_avgpool(x, 6))
    x = b.relu(b.linear(b.dropout(x), 4096, name="classifier.fc1"))
    x = b.relu(b.linear(b.dropout(x), 4096, name="classifier.fc2"))
    return b.linear(x, classes, name="classifier.fc3")


VGG16 = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


def vgg16(b: Builder, image_size: int = 224, classes: int = 1000) -> str:
    """torchvision VGG-16 (configuration D of Simonyan & Zisserman 2015), no batch norm."""
    x = b.input((3, image_size, image_size))
    for i, v in enumerate(VGG16):
        x = b.maxpool(x, 2) if v == "M" else b.relu(b.conv(x, v, 3, pad=1, name=f"features.conv{i}"))
    x = b.flatten(b.adaptive_avgpool(x, 7))
    x = b.dropout(b.relu(b.linear(x, 4096, name="classifier.fc1")))
    x = b.dropout(b.relu(b.linear(x, 4096, name="classifier.fc2")))
    return b.linear(x, classes, name="classifier.fc3")


def _conv_bn_relu(b: Builder, x, c_out, k, stride=1, pad=0, groups=1, act="relu", name="conv"):
    with b.scope(name):
        x = b.bn(b.conv(x, c_out, k, stride, pad, groups=groups, bias=False), name="bn")
        return b.act(x, act) if act else x


def googlenet(b: Builder, image_size: int = 224, classes: int = 1000) -> str:
    """torchvision GoogLeNet (Szegedy et al. 2015) without the auxiliary heads.

    As in torchvision, the "5x5" branch uses a 3x3 convolution (a known quirk kept for equal parameters),
    and every convolution is conv (no bias) + batch norm + ReLU.
    """
    x = b.input((3, image_size, image_size))
    x = _conv_bn_relu(b, x, 64, 7, 2, 3, name="conv1")
    x = b.maxpool(x, 3, 2, name="maxpool1", ceil_mode=True)
    x = _conv_bn_relu(b, x, 64, 1, name="conv2")
    x = _conv_bn_relu(b, x, 192, 3, pad=1, name="conv3")
    x = b.maxpool(x, 3, 2, name="maxpool2", ceil_mode=True)
    cfg = {"3a": (64, 96, 128, 16, 32, 32), "3b": (128, 128, 192, 32, 96, 64), "pool3": None,
           "4a": (192, 96, 208, 16, 48, 64), "4b": (160, 112, 224, 24, 64, 64), "4c": (128, 128, 256, 24, 64, 64),
           "4d": (112, 144, 288, 32, 64, 64), "4e": (256, 160, 320, 32, 128, 128), "pool4": None,
           "5a": (256, 160, 320, 32, 128, 128), "5b": (384, 192, 384, 48, 128, 128)}
    for name, c in cfg.items():
        if c is None:
            x = b.maxpool(x, 3 if name == "pool3" else 2, 2, name=name, ceil_mode=True)
            continue
        c1, c3r, c3, c5r, c5, cp = c
        with b.scope(f"inception{name}"):
            br1 = _conv_bn_relu(b, x, c1, 1, name="branch1")
            br2 = _conv_bn_relu(b, _conv_bn_relu(b, x, c3r, 1, name="branch2.0"), c3, 3, pad=1, name="branch2.1")
            br3 = _conv_bn_relu(b, _conv_bn_relu(b, x, c5r, 1, name="branch3.0"), c5, 3, pad=1, name="branch3.1")
            br4 = _conv_bn_relu(b, b.maxpool(x, 3, 1, 1, "branch4.pool", ceil_mode=True), cp, 1, name="branch4.1")
            x = b.concat([br1, br2, br3, br4])
    x = b.flatten(b.adaptive_avgpool(x, 1))
    return b.linear(b.dropout(x), classes, name="fc")


def _squeeze_excite(b: Builder, x, reduction: int):
    """Squeeze-and-excitation (Hu et al. 2018, Fig. 3): global average pool, a bottleneck of two fully
    connected layers with biases (as 1x1 convolutions) C -> C/r -> C, ReLU then sigmoid, and the input's
    feature maps scaled by the result."""
    c = b.shape(x)[0]
    with b.scope("se"):
        s = b.relu(b.conv(b.adaptive_avgpool(x, 1), c // reduction, 1, name="fc1"))
        s = b.act(b.conv(s, c, 1, name="fc2"), "sigmoid")
        return b.channel_scale(x, s)


def _bottleneck(b: Builder, x, planes, stride, downsample, name, groups=1, width_per_group=64, se_reduction=0):
    """One bottleneck block in scope ``name``; the blocks of a stage after its first are identical: built once,
    added again (:meth:`~.builder.Builder.repeated`)."""
    width = planes * width_per_group // 64 * groups  # torchvision Bottleneck

    def block(x):
        out = _conv_bn_relu(b, x, width, 1, name="conv1")
        out = _conv_bn_relu(b, out, width, 3, stride, 1, groups=groups, name="conv2")
        out = _conv_bn_relu(b, out, planes * 4, 1, act=None, name="conv3")
        if se_reduction:
            out = _squeeze_excite(b, out, se_reduction)
        sc = _conv_bn_relu(b, x, planes * 4, 1, stride, act=None, name="downsample") if downsample else x
        return b.relu(b.add(out, sc))
    return b.repeated(name, x, block, ("bottleneck", planes, stride, downsample, groups, width_per_group, se_reduction))


def resnet(b: Builder, blocks=(3, 4, 6, 3), image_size: int = 224, classes: int = 1000, groups: int = 1,
           width_per_group: int = 64, se_reduction: int = 0) -> str:
    """torchvision ResNet with bottleneck blocks (He et al. 2016; v1.5: stride in the 3x3 conv); with
    ``groups`` and ``width_per_group`` ResNeXt (Xie et al. 2017: the 3x3 convolution of a block in
    ``groups`` groups of ``width_per_group`` x planes / 64 channels; 32x4d: 32 groups of 4 at the first
    stage); with ``se_reduction`` r a squeeze-and-excitation module (reduction r) on each block's residual
    branch before the addition (SE-ResNet / SE-ResNeXt, Hu et al. 2018, Fig. 3)."""
    x = b.input((3, image_size, image_size))
    x = _conv_bn_relu(b, x, 64, 7, 2, 3, name="conv1")
    x = b.maxpool(x, 3, 2, 1)
    c_in = 64
    for stage, (n, width) in enumerate(zip(blocks, (64, 128, 256, 512)), start=1):
        for i in range(n):
            stride = 2 if stage > 1 and i == 0 else 1
            x = _bottleneck(b, x, width, stride, i == 0 and (stride != 1 or c_in != width * 4), f"layer{stage}.{i}",
                            groups, width_per_group, se_reduction)
            c_in = width * 4
    x = b.flatten(b.adaptive_avgpool(x, 1))
    return b.linear(x, classes, name="fc")


def densenet121(b: Builder, image_size: int = 224, classes: int = 1000, growth: int = 32,
                blocks=(6, 12, 24, 16), init: int = 64, bn_size: int = 4) -> str:
    """torchvision DenseNet-121 (Huang et al. 2017): BN-ReLU-conv layers, concatenated features."""
    x = b.input((3, image_size, image_size))
    x = _conv_bn_relu(b, x, init, 7, 2, 3, name="features.conv0")
    x = b.maxpool(x, 3, 2, 1)
    c = init
    for bi, n in enumerate(blocks, start=1):
        feats = [x]
        for li in range(1, n + 1):
            with b.scope(f"denseblock{bi}.layer{li}"):
                cat = b.concat(feats) if len(feats) > 1 else feats[0]
                y = b.conv(b.relu(b.bn(cat, name="norm1")), bn_size * growth, 1, bias=False, name="conv1")
                y = b.conv(b.relu(b.bn(y, name="norm2")), growth, 3, pad=1, bias=False, name="conv2")
            feats.append(y)
        x = b.concat(feats, name=f"denseblock{bi}.out")
        c += n * growth
        if bi < len(blocks):
            with b.scope(f"transition{bi}"):
                x = b.conv(b.relu(b.bn(x, name="norm")), c // 2, 1, bias=False, name="conv")
                x = b.avgpool(x, 2, 2)
            c //= 2
    x = b.relu(b.bn(x, name="features.norm5"))
    x = b.flatten(b.adaptive_avgpool(x, 1))
    return b.linear(x, classes, name="classifier")


MOBILENET_V2 = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1)]  # expansion t, channels c, repeats n, stride s (Sandler et al. 2018, Table 2)


def mobilenet_v2(b: Builder, image_size: int = 224, classes: int = 1000) -> str:
    """torchvision MobileNetV2 (Sandler et al. 2018), width 1.0: inverted residuals with ReLU6."""
    x = b.input((3, image_size, image_size))
    x = _conv_bn_relu(b, x, 32, 3, 2, 1, act="relu6", name="features.0")
    c_in, idx = 32, 1
    for t, c, n, s in MOBILENET_V2:
        for i in range(n):
            stride = s if i == 0 else 1
            with b.scope(f"features.{idx}"):
                hidden = c_in * t
                y = x if t == 1 else _conv_bn_relu(b, x, hidden, 1, act="relu6", name="expand")
                y = _conv_bn_relu(b, y, hidden, 3, stride, 1, groups=hidden, act="relu6", name="dw")
                y = _conv_bn_relu(b, y, c, 1, act=None, name="project")
                x = b.add(x, y) if stride == 1 and c_in == c else y
            c_in, idx = c, idx + 1
    x = _conv_bn_relu(b, x, 1280, 1, act="relu6", name=f"features.{idx}")
    x = b.flatten(b.adaptive_avgpool(x, 1))
    return b.linear(b.dropout(x), classes, name="classifier")


def _inception_a(b: Builder, x, pool_features: int) -> str:
    br1 = _conv_bn_relu(b, x, 64, 1, name="branch1x1")
    br5 = _conv_bn_relu(b, _conv_bn_relu(b, x, 48, 1, name="branch5x5_1"), 64, 5, pad=2, name="branch5x5_2")
    br3 = _conv_bn_relu(b, x, 64, 1, name="branch3x3dbl_1")
    br3 = _conv_bn_relu(b, br3, 96, 3, pad=1, name="branch3x3dbl_2")
    br3 = _conv_bn_relu(b, br3, 96, 3, pad=1, name="branch3x3dbl_3")
    brp = _conv_bn_relu(b, b.avgpool(x, 3, 1, 1, name="branch_pool.avg"), pool_features, 1, name="branch_pool")
    return b.concat([br1, br5, br3, brp])


def _inception_b(b: Builder, x) -> str:
    br3 = _conv_bn_relu(b, x, 384, 3, 2, name="branch3x3")
    brd = _conv_bn_relu(b, _conv_bn_relu(b, x, 64, 1, name="branch3x3dbl_1"), 96, 3, pad=1, name="branch3x3dbl_2")
    brd = _conv_bn_relu(b, brd, 96, 3, 2, name="branch3x3dbl_3")
    return b.concat([br3, brd, b.maxpool(x, 3, 2, name="branch_pool")])


def _inception_c(b: Builder, x, c7: int) -> str:
    br1 = _conv_bn_relu(b, x, 192, 1, name="branch1x1")
    br7 = _conv_bn_relu(b, x, c7, 1, name="branch7x7_1")
    br7 = _conv_bn_relu(b, br7, c7, (1, 7), pad=(0, 3), name="branch7x7_2")
    br7 = _conv_bn_relu(b, br7, 192, (7, 1), pad=(3, 0), name="branch7x7_3")
    brd = _conv_bn_relu(b, x, c7, 1, name="branch7x7dbl_1")
    for i, (k, p, c) in enumerate((((7, 1), (3, 0), c7), ((1, 7), (0, 3), c7), ((7, 1), (3, 0), c7),
                                   ((1, 7), (0, 3), 192)), start=2):
        brd = _conv_bn_relu(b, brd, c, k, pad=p, name=f"branch7x7dbl_{i}")
    brp = _conv_bn_relu(b, b.avgpool(x, 3, 1, 1, name="branch_pool.avg"), 192, 1, name="branch_pool")
    return b.concat([br1, br7, brd, brp])


def _inception_d(b: Builder, x) -> str:
    br3 = _conv_bn_relu(b, _conv_bn_relu(b, x, 192, 1, name="branch3x3_1"), 320, 3, 2, name="branch3x3_2")
    br7 = _conv_bn_relu(b, x, 192, 1, name="branch7x7x3_1")
    br7 = _conv_bn_relu(b, br7, 192, (1, 7), pad=(0, 3), name="branch7x7x3_2")
    br7 = _conv_bn_relu(b, br7, 192, (7, 1), pad=(3, 0), name="branch7x7x3_3")
    br7 = _conv_bn_relu(b, br7, 192, 3, 2, name="branch7x7x3_4")
    return b.concat([br3, br7, b.maxpool(x, 3, 2, name="branch_pool")])


def _inception_e(b: Builder, x) -> str:
    br1 = _conv_bn_relu(b, x, 320, 1, name="branch1x1")
    br3 = _conv_bn_relu(b, x, 384, 1, name="branch3x3_1")
    br3 = [_conv_bn_relu(b, br3, 384, (1, 3), pad=(0, 1), name="branch3x3_2a"),
           _conv_bn_relu(b, br3, 384, (3, 1), pad=(1, 0), name="branch3x3_2b")]
    brd = _conv_bn_relu(b, _conv_bn_relu(b, x, 448, 1, name="branch3x3dbl_1"), 384, 3, pad=1, name="branch3x3dbl_2")
    brd = [_conv_bn_relu(b, brd, 384, (1, 3), pad=(0, 1), name="branch3x3dbl_3a"),
           _conv_bn_relu(b, brd, 384, (3, 1), pad=(1, 0), name="branch3x3dbl_3b")]
    brp = _conv_bn_relu(b, b.avgpool(x, 3, 1, 1, name="branch_pool.avg"), 192, 1, name="branch_pool")
    return b.concat([br1, *br3, *brd, brp])


def inception_v3(b: Builder, image_size: int = 299, classes: int = 1000) -> str:
    """torchvision Inception v3 (Szegedy et al. 2016, "Rethinking the Inception Architecture", Figures 5-7
    and Table 1) without the auxiliary classifier (``aux_logits=False``; it runs in training only): 299x299
    inputs, stem to 35x35x192, three Inception-A, a grid reduction, four Inception-C with factorized
    1x7 / 7x1 convolutions, a reduction and two Inception-E blocks to 8x8x2048. Every convolution is
    torchvision's BasicConv2d (no bias, batch norm, ReLU: :func:`_conv_bn_relu`), so the parameters equal
    torchvision's."""
    if image_size < 75:  # the stem and the two grid reductions leave 1x1 at 75 (torchvision's minimum)
        raise ValueError("it needs at least 75x75")
    x = b.input((3, image_size, image_size))
    x = _conv_bn_relu(b, x, 32, 3, 2, name="Conv2d_1a_3x3")
    x = _conv_bn_relu(b, x, 32, 3, name="Conv2d_2a_3x3")
    x = _conv_bn_relu(b, x, 64, 3, pad=1, name="Conv2d_2b_3x3")
    x = b.maxpool(x, 3, 2, name="maxpool1")
    x = _conv_bn_relu(b, x, 80, 1, name="Conv2d_3b_1x1")
    x = _conv_bn_relu(b, x, 192, 3, name="Conv2d_4a_3x3")
    x = b.maxpool(x, 3, 2, name="maxpool2")
    for name, pool_features in (("Mixed_5b", 32), ("Mixed_5c", 64), ("Mixed_5d", 64)):
        with b.scope(name):
            x = _inception_a(b, x, pool_features)
    with b.scope("Mixed_6a"):
        x = _inception_b(b, x)
    for name, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        with b.scope(name):
            x = _inception_c(b, x, c7)
    with b.scope("Mixed_7a"):
        x = _inception_d(b, x)
    for name in ("Mixed_7b", "Mixed_7c"):
        with b.scope(name):
            x = _inception_e(b, x)
    x = b.flatten(b.adaptive_avgpool(x, 1))
    return b.linear(b.dropout(x), classes, name="fc")
