"""What a job trains, read from how it was launched: batch scripts, command lines and Kubernetes
manifests of torchtitan, NeMo 2.0 / 1.0, Megatron-Bridge, Megatron-LM, Megatron-DeepSpeed,
HF Trainer / TRL / accelerate, Axolotl, LLaMA-Factory, torchtune, LLM Foundry and plain PyTorch
FSDP scripts, resolved as each framework resolves its settings (:mod:`planner.launch.describe`).
Pure: files come through a :class:`~planner.launch.types.LaunchFiles` port."""
