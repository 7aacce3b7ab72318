"""The product lines that cannot run without a GPU, each with the reason: the one list.

Every other device- or dtype-dependent line runs in the CPU suite: the choices are functions of
the device type (plugins/layers/device_policy.py, triton_kernels/devices.py,
``triton_kernels.trans_path``) and tests drive their CUDA arms with device-type strings.
``make coverage`` (tools/coverage_report.py) checks the claim: a line that mentions a device
(DEVICE_LINE) and that the suite never executes must match an entry here, and every entry must
still match a line of its file (tests/test_gpu_only_list.py).

An entry is (file, text, reason): ``text`` is a fragment of the line, so the list survives edits
elsewhere in the file.
"""
import re

GPU_ONLY = [
    ("evaluations/qa_eval.py", "model = model.cuda()",
     "moves the model to the GPU: needs a CUDA device (the CPU arm, --cpu, runs in the suite)"),
    ("evaluations/qa_eval.py", "utils.move_to_cuda(sample)",
     "copies a batch to the GPU: needs a CUDA device"),
    ("evaluations/entailment_eval.py", "utils.move_to_cuda(batch)",
     "copies a batch to the GPU: needs a CUDA device"),
    ("evaluations/entailment_eval.py", "model = model.cuda()",
     "moves the model to the GPU: needs a CUDA device"),
    ("triton_kernels/trans_triton.py", "torch.cuda.synchronize()",
     "times a kernel config (NESYSEQ_TRANS_AUTOTUNE=1, compiled kernels only): a CUDA stream sync"),
]

# A line that names a device, a device query or a CUDA-only call.
DEVICE_LINE = re.compile(r"\bcuda\b|is_cuda|\.cuda\(|device\.type|device_type|synchronize\(|"
                         r"get_device_capability|mem_get_info|max_memory_allocated|move_to_cuda")


def entry_for(path: str, line: str):
    """The GPU_ONLY entry that covers ``line`` of ``path``, or None."""
    for f, text, reason in GPU_ONLY:
        if f == path and text in line:
            return (f, text, reason)
    return None
