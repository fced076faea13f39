# The trained model outside ampc: one more step in onnxruntime, and the weights in transformers.
import numpy as np, onnxruntime as ort, torch, transformers
from safetensors.torch import load_file

test = {n: np.load(f"data/test/{n}.npy") for n in ("input_ids", "attention_mask", "labels")}

step = ort.InferenceSession("step.onnx", providers=["CPUExecutionProvider"])
feeds = {name: array[:32] for name, array in test.items()}
feeds["ampc.lr"] = np.array(1e-3, np.float32)  # a 0-d array, not a NumPy scalar
out = dict(zip([o.name for o in step.get_outputs()], step.run(None, feeds)))
print(f"onnxruntime step: loss {out['loss']:.4f}, applied {bool(out['ampc.applied'])}")

config = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=128, vocab_size=1000, num_labels=2)
bert = transformers.BertForSequenceClassification(config).eval()
state = {k.removeprefix("model."): v for k, v in load_file("weights.safetensors").items()}
result = bert.load_state_dict(state, strict=False)
print("missing:", result.missing_keys, "unexpected:", result.unexpected_keys)
with torch.no_grad():
    logits = bert(input_ids=torch.from_numpy(test["input_ids"]),
                  attention_mask=torch.from_numpy(test["attention_mask"])).logits
accuracy = (logits.argmax(1).numpy() == test["labels"]).mean()
print(f"transformers with the trained weights: test accuracy {accuracy:.4f}")
