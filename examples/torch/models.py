"""The two models of chorus-train, in torch.nn."""

from torch import nn


def mlp():
    """784-512-512-10: 669,706 parameters."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(784, 512),
        nn.ReLU(),
        nn.Linear(512, 512),
        nn.ReLU(),
        nn.Linear(512, 10),
    )


def cnn():
    """Conv(1->32,3)-ReLU-Pool-Conv(32->64,3)-ReLU-Pool-FC(1600->128)-FC(128->10): 225,034
    parameters."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 5 * 5, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )


MODELS = {"mlp": mlp, "cnn": cnn}
