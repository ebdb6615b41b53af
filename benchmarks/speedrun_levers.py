"""Speed-run levers that are no `BackboneSpec` field, for the recipe screen only: each patches `compatrepro.train` in
this process (the candidate's own artifact cache keeps its models apart, since the patch is no part of a cache key).

- `nesterov`: SGD with Nesterov momentum.
- `ema(decay)`: the trained model is an exponential moving average of its weights and BatchNorm statistics, updated
  after every step (airbench's EMA, without its warm-up of the decay).
- `lookahead(k, alpha)`: Lookahead (Zhang et al. 2019): every k steps the slow weights move `alpha` of the way to the
  fast ones and the fast weights restart from them.
- `whitened_stem(eps)`: the first convolution's filters are the whitening of its input patches (the eigenvectors of
  the training images' patch covariance, each with its negative, scaled by 1/sqrt(eigenvalue + eps)) and stay frozen
  (airbench's whitened first layer).
"""
import torch
import torch.nn.functional as F

from compatrepro import train

_library_optimizer, _library_initial_model = train._make_optimizer, train.initial_model
_made = []   # the model of the training under way: initial_model() makes it just before _make_optimizer() is called


def _track_initial_model(spec, ds):
    model = _library_initial_model(spec, ds)
    _made[:] = [model]
    return model


def nesterov():
    train._make_optimizer = lambda spec, params: (
        torch.optim.SGD(params, lr=spec.base_lr, momentum=spec.momentum, weight_decay=spec.weight_decay, nesterov=True)
        if spec.optimizer == 'sgd' else _library_optimizer(spec, params))


def _after_each_step(opt, after):
    "`opt` that calls `after()` after each of its steps."
    opt.register_step_post_hook(lambda *_: after())
    return opt


def _float_state(model):
    return {k: v for k, v in model.state_dict().items() if v.is_floating_point()}


def ema(decay: float):
    "The weights' and BatchNorm statistics' EMA, put into the model when training ends (its `eval()`)."
    if not 0. < decay < 1.: raise ValueError(f"ema: decay must be in (0, 1), got {decay}")
    train.initial_model = _track_initial_model

    def make(spec, params):
        model = _made[0]
        avg = {k: v.detach().clone() for k, v in _float_state(model).items()}
        def update():
            with torch.no_grad():
                for k, v in _float_state(model).items():
                    avg[k].lerp_(v, 1. - decay)
        library_eval = model.eval
        def eval_with_average():   # _fit_backbone calls eval() once, after the last epoch
            with torch.no_grad():
                for k, v in _float_state(model).items():
                    v.copy_(avg[k])
            return library_eval()
        model.eval = eval_with_average
        return _after_each_step(_library_optimizer(spec, params), update)
    train._make_optimizer = make


def lookahead(k: int = 5, alpha: float = 0.5):
    "Lookahead around the library's optimiser; the model ends on its fast weights (the slow ones at a multiple of k)."
    if k < 1 or not 0. < alpha <= 1.: raise ValueError(f"lookahead: need k >= 1 and alpha in (0, 1], got {k}, {alpha}")

    def make(spec, params):
        params = list(params)
        slow = [p.detach().clone() for p in params]
        count = [0]
        def update():
            count[0] += 1
            if count[0] % k: return
            with torch.no_grad():
                for p, s in zip(params, slow):
                    s.lerp_(p, alpha); p.copy_(s)
        return _after_each_step(_library_optimizer(spec, params), update)
    train._make_optimizer = make


def whitening_filters(images: torch.Tensor, kernel_size: int, n_filters: int, eps: float = 5e-4) -> torch.Tensor:
    """[n_filters, C, k, k] filters whose responses to `images`' k x k patches are decorrelated with unit variance: the
    leading n_filters/2 eigenvectors of the patch covariance, each with its negative, over sqrt(eigenvalue + eps)."""
    if n_filters % 2: raise ValueError(f"whitening_filters: n_filters must be even (each filter and its negative), got {n_filters}")
    c = images.shape[1]
    patches = F.unfold(images.float(), kernel_size).transpose(1, 2).reshape(-1, c*kernel_size*kernel_size)
    patches = patches - patches.mean(0)
    eigval, eigvec = torch.linalg.eigh(patches.T @ patches / len(patches))
    eigval, eigvec = eigval.flip(0)[:n_filters//2], eigvec.flip(1)[:, :n_filters//2]
    w = (eigvec / (eigval + eps).sqrt()).T.reshape(-1, c, kernel_size, kernel_size)
    return torch.cat([w, -w])


def whitened_stem(eps: float = 5e-4, n_images: int = 512):
    "A ResNet's first convolution set to `whitening_filters` of the first n_images training images, and frozen."
    from compatrepro.loaders import iter_batches

    def initial_model(spec, ds):
        model = _library_initial_model(spec, ds)
        conv = model.backbone.conv1
        x, _ = next(iter(iter_batches(ds, min(n_images, len(ds)), 0, spec.seed, torch.device('cpu'), train=False)))
        with torch.no_grad():
            conv.weight.copy_(whitening_filters(x, conv.kernel_size[0], conv.out_channels, eps))
        conv.weight.requires_grad_(False)   # the optimiser skips it: no gradient, no weight decay
        return model
    train.initial_model = initial_model
