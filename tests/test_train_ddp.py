"The DDP path of the backbone trainer, launched by torchrun as one process on CPU with the gloo backend."
import os, subprocess, sys, textwrap
from pathlib import Path
import pytest, torch

from compatrepro import specs as SP, train as T
from _doubles import TinyDataset

TESTS = Path(__file__).resolve().parent
SPEC = dict(split='imagenet-500', scale='tiny', seed=1, arch='resnet18', emb_dim=8, epochs=1, batch_size=8, lr=0.8, warmup_epochs=0)
SCRIPT = textwrap.dedent(f'''
    import os, sys, torch
    os.environ['COMPATREPRO_PROGRESS'] = '0'
    sys.path.insert(0, {str(TESTS)!r})
    from _doubles import TinyDataset
    from compatrepro import specs as SP, train as T
    art = T.train_backbone(SP.BackboneSpec(**{SPEC!r}), TinyDataset(n=16, c=4, size=16), device='cpu',
                           checkpoint=sys.argv[1], show_progress=False)
    print('DDP', torch.distributed.is_initialized(), torch.distributed.get_world_size())
    torch.save(art['model']['state_dict'], sys.argv[2])
    torch.distributed.destroy_process_group()
''')


pytestmark = pytest.mark.usefixtures('one_thread')


def test_ddp_single_process_matches_plain(tmp_path):
    script = tmp_path/'run.py'; script.write_text(SCRIPT)
    # torchrun sets WORLD_SIZE=1, RANK, MASTER_ADDR/PORT; COMPATREPRO_DDP=1 makes a world of one join the process group
    env = dict(os.environ, OMP_NUM_THREADS='1', COMPATREPRO_DDP='1')
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=1',
           str(script), str(tmp_path/'ddp.ckpt'), str(tmp_path/'ddp.pt')]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert 'DDP True 1' in r.stdout
    ddp = torch.load(tmp_path/'ddp.pt')
    assert torch.load(tmp_path/'ddp.ckpt', weights_only=False)['epoch'] == 1   # rank 0 wrote the checkpoint
    plain = T.train_backbone(SP.BackboneSpec(**SPEC), TinyDataset(n=16, c=4, size=16), device='cpu',
                             show_progress=False)['model']['state_dict']
    assert ddp.keys() == plain.keys()
    for k in ddp: assert torch.allclose(ddp[k].float(), plain[k].float(), atol=1e-5), k
    assert not torch.equal(ddp['embedding.weight'], T.EmbeddingModel('resnet18', 8, range(4), scale='tiny').state_dict()['embedding.weight'])


KEYS_SCRIPT = textwrap.dedent('''
    import os, torch, torch.distributed as dist
    dist.init_process_group('gloo')
    from compatrepro import train as T, losses as L
    r = dist.get_rank()
    g = torch.Generator().manual_seed(0)
    a, b, y = torch.randn(7, 4, generator=g), torch.randn(7, 4, generator=g), torch.tensor([0, 1, 2, 0, 1, 3, 2])
    rows = [slice(0, 4), slice(4, 7)][r]                 # unequal shares of one batch of 7: 4 and 3
    an = a[rows].clone().requires_grad_()
    keys = T.ract_keys(an, b[rows], y[rows])
    loss = L.ra_comp_loss(an, b[rows], y[rows], reduction='none', keys=keys)
    assert torch.allclose(loss, L.ra_comp_loss(a, b, y, reduction='none')[rows], atol=1e-6), loss
    loss.sum().backward()
    assert an.grad.abs().sum() > 0
    os.write(1, f'KEYS OK {r}\\n'.encode())   # one write: the two ranks share the pipe
    dist.destroy_process_group()
''')


def test_ract_negatives_gathered_across_processes(tmp_path):
    """RACT's negatives under data parallelism (OpenCompatible's gather_all): two gloo processes, each holding part of a
    batch, get the losses of their anchors against the whole batch, as one process holding it would; the process's own
    rows keep their gradient."""
    script = tmp_path/'keys.py'; script.write_text(KEYS_SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS='1')
    r = subprocess.run([sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=2', str(script)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert 'KEYS OK 0' in r.stdout and 'KEYS OK 1' in r.stdout
