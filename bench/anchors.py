"""The classic tutorials as a user would write them by hand, without
int8store: the anchors ``bench/time_to_accuracy.py`` runs beside the
tutorials, each in a fresh process.

The same models (LeNet5: two 5x5 conv + 2x2 max-pool tanh layers, a tanh
layer of 500, a softmax; logistic regression), initialised as the tutorials
do, the same SGD (rate, batch), the same loop as the classic tutorials:
validation every epoch, the test split scored when the validation error
improves, patience-based early stopping. The images are float32 resident on
the device (the values the tutorials see: ``table[pixel]``), as the classic
``shared_dataset`` held them.

Ways: ``jax-jit`` (one ``jax.jit`` call a step, a split scored in one call),
``jax-scan`` (one call an epoch, ``lax.scan`` over its steps),
``torch-resident`` (eager PyTorch, float32 tensors resident on the device),
``torch-dataloader`` (PyTorch's ``DataLoader`` over the images in host
memory, pinned, two workers, each minibatch copied to the device).

    python bench/anchors.py WAY MODEL DATA.npz [--epochs N]

``DATA.npz`` holds ``x_train``, ``y_train``, ... as uint8 pixels and
``table`` (the float32 value of each pixel level). The last line printed is
a JSON record: the device, the training loop's seconds, the best validation
and test errors (%), the epochs run.
"""

import argparse
import json
import sys
import time

import numpy as np

RATES = {"lenet5": 0.1, "logistic": 0.13}
BATCHES = {"lenet5": 500, "logistic": 600}
PATIENCE = {"lenet5": 10000, "logistic": 5000}


def load(path):
    """``{split: (float32 images (N, 784), int32 labels)}``."""
    with np.load(path, allow_pickle=False) as held:
        table = held["table"].astype(np.float32)
        return {name: (table[held[f"x_{name}"].reshape(len(held[f"y_{name}"]), -1)],
                       held[f"y_{name}"].astype(np.int32))
                for name in ("train", "valid", "test")}


def lenet5_init(rng):
    """The tutorial's LeNet5 parameters (numpy.random.RandomState(23455)),
    as (W, b) pairs: conv0, conv1, hidden, softmax."""
    def uniform(shape, fan_in, fan_out):
        bound = np.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-bound, bound, shape).astype(np.float32)

    return [uniform((20, 1, 5, 5), 25, 20 * 25 // 4), np.zeros(20, np.float32),
            uniform((50, 20, 5, 5), 500, 50 * 25 // 4), np.zeros(50, np.float32),
            uniform((800, 500), 800, 500), np.zeros(500, np.float32),
            np.zeros((500, 10), np.float32), np.zeros(10, np.float32)]


def init(model):
    if model == "lenet5":
        return lenet5_init(np.random.RandomState(23455))
    return [np.zeros((784, 10), np.float32), np.zeros(10, np.float32)]


class EarlyStopping:
    """The classic tutorials' loop around an epoch: validation each epoch,
    the test error of each new best, patience."""

    def __init__(self, model, n_batches, epochs):
        self.patience, self.n_batches, self.epochs = PATIENCE[model], n_batches, epochs
        self.best, self.test, self.epoch = np.inf, None, 0

    def run(self, train_epoch, valid_error, test_error):
        while self.epoch < self.epochs:
            self.epoch += 1
            train_epoch(self.epoch)
            iteration = self.epoch * self.n_batches - 1
            error = valid_error()
            if error < self.best:
                if error < self.best * 0.995:
                    self.patience = max(self.patience, iteration * 2)
                self.best = error
                self.test = test_error()
            if self.patience <= iteration:
                break


# -- plain JAX ------------------------------------------------------------------------

def jax_way(model, splits, epochs, per_epoch_call):
    import jax
    import jax.numpy as jnp

    batch, rate = BATCHES[model], RATES[model]

    def forward(params, x):
        if model == "logistic":
            W, b = params
            return x @ W + b
        W0, b0, W1, b1, W2, b2, W3, b3 = params

        def conv_pool(h, W, b):
            h = jax.lax.conv_general_dilated(h, W, (1, 1), "VALID")
            h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2),
                                      "VALID")
            return jnp.tanh(h + b[None, :, None, None])

        h = conv_pool(x.reshape(-1, 1, 28, 28), W0, b0)
        h = conv_pool(h, W1, b1)
        h = jnp.tanh(h.reshape(h.shape[0], -1) @ W2 + b2)
        return h @ W3 + b3

    def loss(params, x, y):
        return -jnp.mean(jax.nn.log_softmax(forward(params, x))[jnp.arange(y.shape[0]), y])

    def padded(x, y):  # to whole chunks of the batch; label -1 counts nothing
        rest = -len(y) % batch
        return (np.concatenate([x, np.zeros((rest, x.shape[1]), x.dtype)]),
                np.concatenate([y, np.full(rest, -1, y.dtype)]))

    xs, ys = (jax.device_put(a) for a in splits["train"])
    (vx, vy), (tx, ty) = [tuple(jax.device_put(a) for a in padded(*splits[name]))
                          for name in ("valid", "test")]
    counts = {id(vy): len(splits["valid"][1]), id(ty): len(splits["test"][1])}
    n_batches = len(splits["train"][1]) // batch

    def step(params, i):
        x = jax.lax.dynamic_slice_in_dim(xs, i * batch, batch)
        y = jax.lax.dynamic_slice_in_dim(ys, i * batch, batch)
        grads = jax.grad(loss)(params, x, y)
        return [p - rate * g for p, g in zip(params, grads)]

    one_step = jax.jit(step, donate_argnums=0)
    whole_epoch = jax.jit(lambda params: jax.lax.scan(
        lambda p, i: (step(p, i), None), params, jnp.arange(n_batches))[0], donate_argnums=0)

    @jax.jit
    def errors(params, x, y):  # a split in one call, in chunks of the batch
        chunks = x.reshape(-1, batch, x.shape[1]), y.reshape(-1, batch)
        wrong = jax.lax.map(lambda c: jnp.sum((jnp.argmax(forward(params, c[0]), 1) != c[1])
                                              & (c[1] >= 0)), chunks)
        return jnp.sum(wrong)

    params = [jax.device_put(p) for p in init(model)]
    state = {"params": params}

    def train_epoch(epoch):
        if per_epoch_call:
            state["params"] = whole_epoch(state["params"])
        else:
            for i in range(n_batches):
                state["params"] = one_step(state["params"], i)

    def error_of(x, y):
        return lambda: 100.0 * float(errors(state["params"], x, y)) / counts[id(y)]

    stopping = EarlyStopping(model, n_batches, epochs)
    began = time.perf_counter()
    stopping.run(train_epoch, error_of(vx, vy), error_of(tx, ty))
    seconds = time.perf_counter() - began
    device = jax.devices()[0]
    return stopping, seconds, f"{device.platform}: {device.device_kind}"


# -- PyTorch ------------------------------------------------------------------------

def torch_way(model, splits, epochs, dataloader):
    import torch
    import torch.nn.functional as F

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    batch, rate = BATCHES[model], RATES[model]
    params = [torch.tensor(p, device=device, requires_grad=True) for p in init(model)]

    def forward(x):
        if model == "logistic":
            return x @ params[0] + params[1]
        W0, b0, W1, b1, W2, b2, W3, b3 = params
        h = torch.tanh(F.max_pool2d(F.conv2d(x.view(-1, 1, 28, 28), W0), 2) + b0[:, None, None])
        h = torch.tanh(F.max_pool2d(F.conv2d(h, W1), 2) + b1[:, None, None])
        h = torch.tanh(h.flatten(1) @ W2 + b2)
        return h @ W3 + b3

    optimizer = torch.optim.SGD(params, lr=rate)
    x_train, y_train = (torch.from_numpy(a) for a in splits["train"])
    n_batches = len(y_train) // batch
    if dataloader:
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(x_train, y_train.long()), batch_size=batch,
            drop_last=True, pin_memory=device.type == "cuda", num_workers=2,
            persistent_workers=True)
    else:
        xs, ys = x_train.to(device), y_train.long().to(device)
    held = {name: tuple(torch.from_numpy(a).to(device) for a in splits[name])
            for name in ("valid", "test")}

    def train_epoch(epoch):
        batches = loader if dataloader else ((xs[i * batch:(i + 1) * batch],
                                              ys[i * batch:(i + 1) * batch])
                                             for i in range(n_batches))
        for x, y in batches:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(forward(x), y).backward()
            optimizer.step()

    def error_of(name):
        x, y = held[name]

        def error():
            with torch.no_grad():
                wrong = sum(int((forward(x[i:i + batch]).argmax(1) != y[i:i + batch]).sum())
                            for i in range(0, len(y), batch))
            return 100.0 * wrong / len(y)

        return error

    stopping = EarlyStopping(model, n_batches, epochs)
    began = time.perf_counter()
    stopping.run(train_epoch, error_of("valid"), error_of("test"))
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - began
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    return stopping, seconds, f"{device.type}: {name}"


WAYS = {"jax-jit": lambda m, s, e: jax_way(m, s, e, per_epoch_call=False),
        "jax-scan": lambda m, s, e: jax_way(m, s, e, per_epoch_call=True),
        "torch-resident": lambda m, s, e: torch_way(m, s, e, dataloader=False),
        "torch-dataloader": lambda m, s, e: torch_way(m, s, e, dataloader=True)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("way", choices=list(WAYS))
    parser.add_argument("model", choices=list(RATES))
    parser.add_argument("data")
    parser.add_argument("--epochs", type=int, default=None,
                        help="at most this many epochs (default: the tutorial's)")
    args = parser.parse_args(argv)
    epochs = args.epochs or {"lenet5": 200, "logistic": 1000}[args.model]
    splits = load(args.data)
    stopping, seconds, device = WAYS[args.way](args.model, splits, epochs)
    print(json.dumps({"device": device, "loop_seconds": seconds, "valid": float(stopping.best),
                      "test": stopping.test, "epochs": stopping.epoch}))


if __name__ == "__main__":
    sys.exit(main())
