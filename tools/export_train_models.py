#!/usr/bin/env python3
"""Small torchvision/transformers models exported for training checks (issue 27), random init
from configs (nothing downloaded), dynamic batch, both torch exporters:

    .venv-torch/bin/python tools/export_train_models.py OUTDIR [resnet18 mobilenet vit bert distilbert gpt2]

writes OUTDIR/MODEL.{legacy,dynamo}.onnx (legacy: opset 17, dynamic_axes; dynamo: Dim("batch",
min=2)). Note: exported in eval mode, so both exporters fold BatchNormalization into the Convs;
pass do_constant_folding=False (legacy) or optimize=False (dynamo) to keep it for training.
"""
import sys, warnings, torch, torchvision, transformers
warnings.filterwarnings("ignore")
torch.manual_seed(0)
B, T = 4, 16
def models():
    yield "resnet18", torchvision.models.resnet18(num_classes=10), (torch.randn(B,3,32,32),), ["image"], ["logits"]
    yield "mobilenet", torchvision.models.mobilenet_v3_small(num_classes=10), (torch.randn(B,3,32,32),), ["image"], ["logits"]
    vc = transformers.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, image_size=32, patch_size=8, num_labels=10)
    yield "vit", transformers.ViTForImageClassification(vc), (torch.randn(B,3,32,32),), ["pixel_values"], ["logits"]
    bc = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, vocab_size=1000, num_labels=2)
    ids = torch.randint(0,1000,(B,T)); am = torch.ones(B,T,dtype=torch.int64)
    yield "bert", transformers.BertForSequenceClassification(bc), (ids, am), ["input_ids","attention_mask"], ["logits"]
    dc = transformers.DistilBertConfig(dim=64, n_layers=2, n_heads=2, hidden_dim=128, vocab_size=1000, num_labels=2)
    yield "distilbert", transformers.DistilBertForSequenceClassification(dc), (ids, am), ["input_ids","attention_mask"], ["logits"]
    gc = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=2, vocab_size=1000, n_positions=64, use_cache=False, bos_token_id=0, eos_token_id=0)
    yield "gpt2", transformers.GPT2LMHeadModel(gc), (ids, am), ["input_ids","attention_mask"], ["logits"]
OUT = sys.argv[1]
only = sys.argv[2:]
for name, m, args, ins, outs in models():
    if only and name not in only: continue
    m.eval()
    class V(torch.nn.Module):
        def __init__(s, m): super().__init__(); s.m = m
        def forward(s, x):
            o = s.m(x); return o.logits if hasattr(o, "logits") else o
    class X(torch.nn.Module):
        def __init__(s, m): super().__init__(); s.m = m
        def forward(s, input_ids, attention_mask):
            return s.m(input_ids=input_ids, attention_mask=attention_mask, return_dict=True).logits
    w = V(m) if len(ins) == 1 else X(m)
    for exporter in ("legacy", "dynamo"):
        path = f"{OUT}/{name}.{exporter}.onnx"
        try:
            if exporter == "legacy":
                dyn = {n: {0: "batch"} for n in ins + outs}
                torch.onnx.export(w, args, path, dynamo=False, opset_version=17, input_names=ins, output_names=outs, dynamic_axes=dyn)
            else:
                bd = torch.export.Dim("batch", min=2)
                dyn = {"x": {0: bd}} if len(ins) == 1 else {"input_ids": {0: bd}, "attention_mask": {0: bd}}
                torch.onnx.export(w, args, path, dynamo=True, dynamic_shapes=dyn, input_names=ins, output_names=outs, external_data=False)
            print("ok", path)
        except Exception as e:
            print("FAIL", path, repr(e.__cause__)[:1500] if e.__cause__ else str(e)[-1500:])
