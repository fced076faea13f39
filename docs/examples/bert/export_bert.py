# A small BERT classifier from a config (random init, nothing downloaded), exported by torch's
# default exporter with a dynamic batch. optimize=False keeps every parameter its own initializer
# (docs/training.md, "Parameters the exporter merged").
import torch, transformers

torch.manual_seed(0)
config = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=128, vocab_size=1000, num_labels=2)
bert = transformers.BertForSequenceClassification(config).eval()


class Logits(torch.nn.Module):  # the exporter wants tensors out, not a ModelOutput
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits


ids = torch.randint(0, 1000, (4, 16))
mask = torch.ones(4, 16, dtype=torch.int64)
batch = torch.export.Dim("batch", min=2)
torch.onnx.export(Logits(bert), (ids, mask), "bert.onnx", dynamo=True, optimize=False,
                  input_names=["input_ids", "attention_mask"], output_names=["logits"],
                  dynamic_shapes={"input_ids": {0: batch}, "attention_mask": {0: batch}})
