"""A small transformer made of torch's own modules (test_torch_model.py): seeded random
weights, about 21 MiB of float32, and a batch of tokens to run it on."""

import json
import struct

import torch

VOCABULARY = 4096
WIDTH = 256


class TinyTransformer(torch.nn.Module):
    """Token embedding, four encoder layers, a final norm and an output projection."""

    def __init__(self, device=None):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCABULARY, WIDTH, device=device)
        layer = torch.nn.TransformerEncoderLayer(WIDTH, nhead=8, dim_feedforward=1024,
                                                 dropout=0.0, batch_first=True, device=device)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=4,
                                                   enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(WIDTH, device=device)
        self.head = torch.nn.Linear(WIDTH, VOCABULARY, bias=False, device=device)

    def forward(self, tokens):
        return self.head(self.norm(self.encoder(self.embed(tokens))))


def seeded_model():
    """The model with the weights of seed 2026, in eval mode."""
    torch.manual_seed(2026)
    return TinyTransformer().eval()


def batch():
    """Two sequences of 64 tokens."""
    generator = torch.Generator().manual_seed(7)
    return torch.randint(0, VOCABULARY, (2, 64), generator=generator)


def run(model):
    """The model's logits for batch(), on one thread (the same reduction order everywhere)."""
    torch.set_num_threads(1)
    with torch.no_grad():
        return model(batch())


def save_safetensors(state, path):
    """Writes `state` (float32 tensors) as a .safetensors file; returns the data's bytes."""
    header, offset, blobs = {}, 0, []
    for name, tensor in state.items():
        data = tensor.detach().contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(encoded)))
        out.write(encoded)
        for data in blobs:
            out.write(data)
    return offset
