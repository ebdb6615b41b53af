"The paper-scale path to its first training steps: a fake ImageNet-style image tree, a DataLoader, 224x224 crops."
import numpy as np, pytest, torch
from PIL import Image

from compatrepro.core import ArtifactCache
from compatrepro.features import get_features
from compatrepro.models import load_model
from compatrepro import train as T


pytestmark = pytest.mark.usefixtures('one_thread')


def _fake_imagenet(root, n_classes=4, n_train=4, n_val=2):
    rng = np.random.default_rng(0)
    for part, k in (('train', n_train), ('val', n_val)):
        for c in range(n_classes):
            d = root/'imagenet'/part/f'n{c:08d}'; d.mkdir(parents=True)
            for i in range(k):
                Image.fromarray(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)).save(d/f'n{c:08d}_{i}.JPEG')
    return root


def test_paper_scale_trains_a_few_steps(tmp_path):
    root = _fake_imagenet(tmp_path/'data')
    spec = T.backbone_spec('imagenet-500', 'paper', seed=0, arch='resnet18', epochs=1, batch_size=4, warmup_epochs=0)
    assert spec.emb_dim == 128 and spec.momentum == 0.875 and spec.label_smoothing == 0.1   # the paper's recipe, smaller
    cache = ArtifactCache(tmp_path/'cache')
    art = T.train_backbone(spec, cache, device='cpu', data_root=str(root), num_workers=0, show_progress=False)
    assert len(art['history']) == 1 and np.isfinite(art['history'][0]['loss'])
    m = load_model(art)
    assert m.class_ids.tolist() == [0, 1]                       # the first half of the 4 synsets: 'imagenet-500'
    assert m.backbone.conv1.kernel_size == (7, 7)               # the ImageNet stem, not the tiny one
    init = T.EmbeddingModel('resnet18', 128, [0, 1]).state_dict()['embedding.weight']
    assert not torch.equal(art['model']['state_dict']['embedding.weight'], init)
    f = get_features(spec, 'imagenet-1k', 'eval', cache, device='cpu', data_root=str(root), show_progress=False, logits=True)
    assert f['features'].shape == (8, 128) and f['labels'].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert f['logits'].shape == (8, 2)
