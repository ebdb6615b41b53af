"""BCT's model and protocol prerequisites (issue 16): the ReLU after the embedding (Table 3, phi^ReLU), equal optimizer
steps per architecture on the stand-in, the IJB-C style face protocols at the template level (1:1 verification with
one model per side, 1:N open-set search over two disjoint galleries) and the partial-backfilling curve of BCT Figure 3."""
from dataclasses import replace

import numpy as np
import pytest
import torch

from compatrepro.core import spec_key
from compatrepro.models import EmbeddingModel, load_model
from compatrepro.train import BackboneSpec, backbone_key, backbone_spec, train_backbone


class _TinyDS(torch.utils.data.Dataset):
    "Eight random 32x32 images of two classes (ids 3 and 7): enough for one short epoch through the DataLoader path."
    classes = np.array([3, 7])
    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(8, 3, 32, 32, generator=g), [3, 7] * 4
    def __len__(self): return 8
    def __getitem__(self, i): return self.x[i], self.y[i]


def test_embedding_relu_features_are_nonnegative_and_default_unchanged():
    torch.manual_seed(0)
    plain = EmbeddingModel('resnet10', emb_dim=16, class_ids=4, scale='tiny').eval()
    relu = EmbeddingModel('resnet10', emb_dim=16, class_ids=4, scale='tiny', embedding_relu=True).eval()
    relu.load_state_dict(plain.state_dict())
    x = torch.randn(5, 3, 32, 32)
    with torch.no_grad():
        f, fr = plain(x), relu(x)
        assert (f < 0).any()                                                   # without it: the linear layer's output
        torch.testing.assert_close(f, plain.embedding(torch.flatten(plain.backbone(x), 1)))
        assert (fr >= 0).all()
        torch.testing.assert_close(fr, torch.relu(f))


def test_embedding_relu_spec_trains_a_relu_model_and_keeps_default_keys():
    spec = BackboneSpec(split='imagenet-500', scale='smoke', arch='resnet10', emb_dim=8, epochs=1, batch_size=4,
                        warmup_epochs=0., optimizer='adam', lr=1e-3, lr_batch=4, augment=False, embedding_relu=True)
    art = train_backbone(spec, _TinyDS(), device='cpu', num_workers=0, show_progress=False)
    assert art['model']['config']['embedding_relu'] is True
    with torch.no_grad(): f = load_model(art)(_TinyDS().x)
    assert (f >= 0).all()
    # the new field is left out of the key at its default: a default spec keeps its address
    t = backbone_spec('imagenet-500', 'tiny')
    assert spec_key('backbone', backbone_key(t)) == '6d501bd19f013d3b'
    assert spec_key('backbone', backbone_key(replace(t, embedding_relu=True))) != spec_key('backbone', backbone_key(t))


def test_steps_like_gives_every_architecture_the_same_optimizer_steps():
    from compatrepro.models import ARCHS
    from compatrepro.train import STANDIN_RECIPES
    ref = backbone_spec('imagenet-1k', 'tiny', arch='resnet18')
    for arch in ARCHS:
        s = backbone_spec('imagenet-1k', 'tiny', arch=arch, steps_like='resnet18')
        assert (s.arch, s.epochs, s.batch_size, s.warmup_epochs) == (arch, ref.epochs, ref.batch_size, ref.warmup_epochs)
    # the default recipe (what the committed FastFill runs were trained with) is untouched
    assert backbone_spec('imagenet-1k', 'tiny', arch='resnet152').epochs == STANDIN_RECIPES['tiny'][1]['resnet152']
    with pytest.raises(ValueError, match='not an architecture'): backbone_spec('imagenet-1k', 'tiny', steps_like='r18')
