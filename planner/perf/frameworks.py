"""What the training framework changes in the step model: documented kernel-level properties.

The scenario names its framework (``training.framework``); the engine reads three properties of
it, each a fact about the software stack, not a tuning knob (the constants they switch on live
in ``efficiency_constants.json``):

* ``fused_attention``: the attention core runs a Hopper-native fused kernel (cuDNN fused
  attention through Transformer Engine, FlashAttention-3 class: warp-specialised, asynchronous
  ``wgmma``/TMA) on Hopper and later GPUs. Megatron-Core and NeMo use Transformer Engine's
  ``DotProductAttention``, which picks cuDNN's fused attention on sm_90 (TE 1.x docs, "Attention
  backends"). PyTorch stacks (FSDP, torchtitan's ``F.scaled_dot_product_attention``,
  DeepSpeed) run FlashAttention-2, which is written for Ampere and reaches ~35 % of the H100
  peak (Shah et al. 2024, FlashAttention-3, Fig. 5-7). On Ampere the native kernel is
  FlashAttention-2 class, so the property changes nothing there.
* ``flash_attention_v1``: the stack's attention kernel is FlashAttention (v1, ``flash-attn``
  1.0.x), not FlashAttention-2. llm-foundry at the benchmark commit (v0.4.0, Dec 2023) installs
  ``flash-attn==1.0.9`` with its default ``gpu`` extra and ships flash attention v1 in its
  default Docker image (``mosaicml/llm-foundry:2.1.0_cu121-latest``; FlashAttention-2 only in
  the separate ``gpu-flash2`` extra / ``_flash2`` images; llm-foundry 0.4.0 ``setup.py`` and
  README). FlashAttention-2 is ~2x faster (Dao 2023, §4.1: 1.7-3.0x; v1 reaches 25-40 % of the
  A100 peak, v2 50-73 %), so v1 runs at ``flash_attention1_relative_efficiency`` of v2. The
  MPT yamls of llm-foundry v0.3.0-v0.4.0 (``scripts/train/yamls/pretrain/mpt-*.yaml``) and the
  benchmark script's default (``submit_benchmarks.py --attn_impl triton`` until ``7f0fdae66``,
  2024-03) select ``attn_impl: triton`` instead: MPT's copy of the FlashAttention Triton kernel
  (``llmfoundry/models/layers/flash_attn_triton.py``, from HazyResearch/flash-attention
  ``flash_attn/flash_attn_triton.py`` @ ``eff9fe6b``, built with ``triton-pre-mlir``), whose
  header rates its forward + backward a little slower than the CUDA v1 kernel on A100. The
  published llm-foundry tables ran that kernel (``benchmarks.accuracy.convert``), and the
  relative efficiency was fitted on their rows, so it prices the Triton kernel too. v1 has
  no narrow-head penalty (head dim 64 is not slower than 128, measured on an H100:
  ``benchmarks/flash_attention_v1_h100.py``), and on Hopper it runs its Ampere code at its A100
  rate scaled by SMs x clock (``flash_attention1_hopper_speedup``; ``planner.perf.efficiency``).
  That scaling was measured for the CUDA v1 kernel; the Triton kernel the H100 tables ran
  (``triton-pre-mlir``'s ``triton_pre_mlir_sm90`` branch, llm-foundry v0.3.0 ``setup.py``) is
  not measured on Hopper.
* ``fused_elementwise``: layer norms, bias+GeLU, bias+dropout+residual, rotary embeddings and
  the cross-entropy run as fused kernels (Transformer Engine / Apex / XLA fusion); eager
  PyTorch runs one kernel per op, each re-reading and re-writing its operands from HBM, which
  multiplies the element-wise traffic (``unfused_elementwise_traffic_factor``).
* ``tp_comm_overlap``: tensor-parallel all-gathers/reduce-scatters are split into chunks and
  overlapped with the GEMMs that consume/produce them (Transformer Engine userbuffers,
  Megatron-LM ``--tp-comm-overlap``; used by the Megatron-LM 2024 H100 and NeMo 24.07 H100
  recipes; Hopper and later). Otherwise only ``tp_overlap_fraction`` is hidden.

* ``pp_comm_overlap``: under the interleaved (virtual-pipeline) 1F1B schedule the send/recv of
  the next chunk's activations and gradients is posted asynchronously and overlaps the current
  chunk's compute (Megatron-Core ``overlap_p2p_comm``, set by the NeMo 24.07 performance
  recipes, ``overlap_p2p_comm: true, batch_p2p_comm: false``); only what exceeds one chunk's
  forward is exposed, plus the warm-up/flush transfers. Without it (and always with
  non-interleaved 1F1B) every transfer is on the critical path. The ``megatron`` profile
  leaves it off: the option arrived in Megatron-LM in 2023, and the published Megatron runs
  modelled here (SC21, Korthikanti et al. 2022) predate it.
* ``zero3_gather_per_tensor``: under ZeRO-3 the stack gathers (and reduce-scatters) each
  parameter tensor with its own collective (DeepSpeed ZeRO-3: ``partition_parameters.py``
  all-gathers the partitioned ``ds_tensor`` of every parameter of the module being fetched),
  instead of one flat buffer per transformer block (PyTorch FSDP's ``FlatParameter`` per
  wrapped block, FSDP2 ``fully_shard`` per block, Megatron's buckets). Every collective pays
  the ring latency, so per-tensor gathers multiply the latency term by the parameter tensors
  of a layer (12 for a GPT layer with biases, 9 for a Llama layer).

* ``zero3_prefetch_params`` and ``zero3_regather_on_recompute``: how far ahead the stack
  gathers ZeRO-3 parameters, and whether a recomputed forward gathers them again. PyTorch
  FSDP/FSDP2 prefetch the next whole wrapped block (``forward_prefetch``/``backward_prefetch``,
  FSDP2's implicit prefetch) and keep a block unsharded from its recomputed forward through its
  backward (0, False). So does Megatron-FSDP, the ``megatron`` profile's ZeRO-3
  (``--data-parallel-sharding-strategy optim_grads_params``; its other strategies are read as
  stages 0-2, ``planner.scenario.megatron_table.MEGATRON_FSDP_STAGES``, and timed as those;
  megatron-core 0.13.1
  ``distributed/custom_fsdp/fully_sharded_data_parallel.py`` and 0.14.0
  ``distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py``, ``_register_fsdp_hooks``): one unit
  per ``TransformerLayer``, the next unit prefetched (``suggested_communication_unit_size``:
  twice the mean unit, ``AllGatherPipeline.all_gather_params``), and ``_root_pre_backward``
  marks every unit ``PRE_BACKWARD``, so the recomputed forward gathers the unit and
  ``_post_forward`` keeps it for the backward ("gather parameters once for both the
  recomputation and backward computation"): two gathers per microbatch under full recompute. Its
  ``_post_backward`` reduce-scatters each unit's gradients after every backward
  (``grad_reduce_every_bprop`` for ``optim_grads``/``optim_grads_params``; ``no_sync`` delays
  only ``no_shard``/``optim``), the expert parameters over the expert data-parallel group
  (``expt_dp_group``), from a gradient buffer that is fp32 when ``grad_reduce_in_fp32``
  (``ParamAndGradBuffer``; Megatron-LM's bf16 default, ``grad_reduce_in_fp32`` below).
  DeepSpeed ZeRO-3 prefetches at most ``stage3_prefetch_bucket_size``
  parameters ahead (default 5e7, DeepSpeed configuration docs), modelled as: only that much of
  the next parameter tensor's gather can run under the current operator's compute; and its
  stage-3 module hooks release parameters after every forward (``post_sub_module_forward``)
  and fetch them before every forward and backward, so under full activation checkpointing
  the forward recomputed inside the backward gathers them once more (5e7, True). The 2021 code
  (DeepSpeed 0.3.13 ``runtime/zero/stage3.py``; 0.3.15-0.4.5 have the same structure) is more
  detailed than this model, and each detail the model leaves out would make it faster: the
  prefetch (``PrefetchCoordinator.get_params_to_prefetch``) gathers whole parameters of the
  next submodules up to the 5e7 elements, so a prefetched weight's gather can hide entirely under
  the current submodule's compute (the model hides ``5e7`` of a tensor of the layer's mean
  size); ``_keep_for_later`` keeps a parameter reused within ``stage3_max_reuse_distance``
  (1e9 elements) gathered, the recomputed forward's last MLP weight into its backward (the
  model re-gathers every tensor); ``stage3_max_live_parameters`` (1e9) stops the prefetch while
  more elements are gathered, i.e. around every 530B MLP weight (1.68e9 each); tensors under
  ``stage3_param_persistence_threshold`` (1e5: biases, norms, 8 of a GPT layer's 12) are
  gathered once per step (``_post_step``) instead of per pass; and every collective is timed
  at the mean size of a layer's tensors. What the model does take from that code is the lock
  step (``zero3_lock_step``). A step-by-step replay of the code's rules
  (``benchmarks/zero3_deepspeed_2021.py``) is further from the published SC21 Table 2 than this
  model (``benchmarks/RESULTS.md``: the code runs faster than the published steps): the
  simpler model stays, and its agreement is not evidence for its details.
* ``zero3_lock_step``: the ZeRO-3 stack synchronises the device before every submodule's
  parameters are used and before every parameter's all-gather (DeepSpeed 0.3-0.4, 2021:
  ``PartitionedParameterCoordinator.fetch_sub_module`` calls ``_synchronize_communication``,
  which waits for the in-flight gathers and calls ``torch.cuda.synchronize()``;
  ``Init._allgather_param`` in ``partition_parameters.py`` calls it again before each gather;
  both calls are in every release from 0.3.13 to 0.4.5). A device-wide synchronise also waits
  for the reduction stream, where the gradient hooks (``reduce_ipg_grads``) launched the
  reduce-scatters of the submodule just run backward: every gradient reduce-scatter is on the
  critical path (charged whole; it can overlap only the kernels of its own submodule's
  backward still running when its hook fires). And the host launches the per-rank copies of
  the list collectives itself (``zero3_list_collectives``;
  ``ProcessGroupNCCL::collective``, torch 1.8-1.10, runs them in the calling thread) before it
  launches the compute a prefetched gather should overlap (the prefetch is issued from the
  submodule's pre-forward hook, ``pre_sub_module_forward_function``): the copies run alone on
  the just-synchronised device, and only the gathers' NCCL kernels overlap compute
  (``planner.perf.data``). True for ``deepspeed``, whose profile describes the DeepSpeed of
  the published runs (2021), not a current one (not checked). The gradient reduce-scatter
  per parameter over a list of per-rank tensors (``Init._reduce_scatter_gradient``) is what
  0.4.3-0.4.5 run by default and 0.3.13-0.4.2 with ``contiguous_gradients`` set; the default
  of 0.3.13-0.4.2 (``ZERO3_OPTIMIZATION_CONTIGUOUS_GRADIENTS_DEFAULT = False``) reduces each
  bucket of up to ``reduce_bucket_size`` (5e8) gradients with one flat all-reduce instead
  (``reduce_ipg_grads`` -> ``buffered_reduce_fallback`` -> ``allreduce_bucket``): twice the
  bytes, no per-rank copies. SC21 does not state its DeepSpeed version or configuration.
* ``dp_bucket_min_params`` and ``dp_bucket_params_per_rank``: the data-parallel gradient
  reduction (ZeRO 0-2) runs in buckets of ``max(min, per_rank · d)`` parameters, one collective
  each: Megatron-Core DDP's default ``max(40000000, 1000000 · dp_size)`` ("larger DP sizes need
  larger buckets to ensure collectives do not become latency-bound",
  ``DistributedDataParallelConfig.bucket_size``); DeepSpeed ZeRO-1/2 ``reduce_bucket_size``
  5e8 elements; PyTorch DDP ``bucket_cap_mb`` 25 MB (6.25e6 fp32 gradients).
* ``overlap_grad_reduce``: whether the data-parallel gradient reduction overlaps the backward
  when the scenario does not say (``parallelism.overlap_grad_reduce``). DeepSpeed's
  ``zero_optimization.overlap_comm`` defaults to false for ZeRO 0-2 and true for ZeRO-3
  (``deepspeed/runtime/zero/config.py``), and its pipeline engine reduces after the flush
  (``_exec_reduce_grads``): false; the other profiles' recipes overlap it.
* ``zero3_backward_prefetch_post``: the ZeRO-3 / FSDP backward prefetches the next unit's
  parameters only after the current unit's gradients are computed (PyTorch FSDP
  ``BackwardPrefetch.BACKWARD_POST``: "prefetches the next set of parameters after the current
  set of parameters' gradient computation. This overlaps the current reduce-scatter and the
  next gradient computation", ``torch.distributed.fsdp.BackwardPrefetch`` docs, PyTorch
  2.1), so every unit's backward all-gather sits on the critical path between two units'
  gradient computations instead of under one (``BACKWARD_PRE``, PyTorch FSDP's own default,
  "enables the most overlap"). Composer sets ``BACKWARD_POST`` unless the FSDP config says
  otherwise (``composer/trainer/dist_strategy.py`` ``set_fsdp_default``, mosaicml 0.17.2, the
  version llm-foundry 0.4.0 pins: ``mosaicml>=0.17,<0.18``; llm-foundry 0.4.0 does not set
  ``backward_prefetch``): true for ``llm_foundry``. torchtitan's FSDP2 prefetches the next
  block before the current one's backward (implicit prefetch): false.
* ``zero3_grad_prep_pass``: before each flat parameter's reduce-scatter, PyTorch FSDP (v1)
  casts the unsharded gradient to the reduce dtype when it differs from the parameters'
  (``_post_backward_hook``: ``flat_param.grad.to(handle._reduce_dtype)``) and divides it by the
  pre-divide factor (``_reduce_grad``: ``_div_if_needed(padded_unsharded_grad,
  _gradient_predivide_factor)``, a factor above 1 for every group of 2 or more ranks,
  ``default_hooks.DefaultState._get_gradient_predivide_factor``), both on the post-backward
  stream, over the whole unsharded gradient of every unit, every microbatch (Composer syncs
  FSDP gradients on every microbatch: ``no_sync`` only for DDP, ``trainer.py``
  ``_train_microbatch``). With bf16 parameters and an fp32 reduction (Composer's
  ``mixed_precision: DEFAULT``) that is 6 + 8 bytes per parameter, 4 with a bf16 one
  (``PURE``) (``planner.perf.data``). True for ``llm_foundry`` (Composer drives FSDP v1);
  torchtitan's and Automodel's FSDP2 reduce through another code path (``foreach_reduce``,
  version-dependent, not checked), and the ``fsdp`` profile leaves it off until a source of
  its own is measured.
* ``zero3_accumulate_unsharded``: under ZeRO-3 the stack accumulates the unsharded gradients
  of its FSDP units across microbatches and reduce-scatters them once per run of backward
  passes, not after every microbatch (``planner.perf.data``). NeMo Automodel drives FSDP2
  (``fully_shard``) so: without pipeline parallelism its training step calls
  ``set_requires_gradient_sync`` on the model with ``is_optim_step`` true only for the last
  gradient-accumulation batch (``_forward_backward_step`` -> ``get_sync_ctx``,
  NVIDIA-NeMo/Automodel ``nemo_automodel/recipes/llm/train_ft.py`` and
  ``nemo_automodel/components/distributed/utils.py`` @ ``89e3a9fdd6``; the benchmark recipe's
  ``run_benchmark`` loops ``_forward_backward_step`` over the ``ga_steps`` batches,
  ``nemo_automodel/recipes/llm/benchmark.py``), so each unit is still gathered for every
  microbatch's forward and backward (``reshard_after_forward`` true without a pipeline,
  ``apply_fsdp`` in ``nemo_automodel/components/moe/parallelizer.py``) but reduced once per
  iteration, under the last backward. With pipeline parallelism the MoE parallelizer shards
  every block with ``reshard_after_forward=not pp_enabled`` (false; the pipeline builder
  passes ``pp_enabled=True``, ``pipelining/functional.py``), and torch's pipeline stage runs
  every backward of a schedule run with ``set_reshard_after_backward(False)`` and
  ``set_requires_gradient_sync(False)``, then, after the model chunk's last backward, calls
  every unit's ``post_backward`` (the reduce-scatters) and
  ``_root_post_backward_final_callback``, which makes the compute stream wait for them
  (``_PipelineStageBase.backward_maybe_with_nosync``, pytorch/pytorch
  ``torch/distributed/pipelining/stage.py`` of the torch 2.x releases Automodel pins,
  ``torch<=2.8.0``; read in copies of that file, not at the 2.8.0 tag; torch 2.13 moves the
  same calls into the schedule's ``REDUCE_GRAD`` action, ``perform_reduce_grad``):
  one gather per unit and run, kept through every microbatch, and one reduce-scatter per run
  that the chunk waits for. FSDP2 keeps each microbatch's 16-bit gradient apart and adds it
  into an accumulator of the reduce dtype (``FSDPParam.to_accumulated_grad_if_needed``,
  ``accumulate_unsharded_grad_if_needed``, ``torch/distributed/fsdp/_fully_shard/_fsdp_param.py``).
  True for ``automodel`` as of ``89e3a9fdd6`` (2025-10-06, the commit whose
  ``docs/performance-summary.md`` first publishes the benchmark rows). Two days later
  ``2c236e081`` adds ``BackendConfig.enable_fsdp_optimizations`` (``MoEFSDPSyncMixin``,
  ``nemo_automodel/components/moe/fsdp_mixin.py``: no resharding and no gradient sync across
  all accumulation steps, one reduction per iteration also under a pipeline) and makes
  ``reshard_after_forward`` a parallelizer option, default false: not described here.
  torchtitan's FSDP2 reduce-scatters every microbatch outside a pipeline (not checked under
  one), and the other FSDP profiles reduce every microbatch.
* ``eager_decoupled_adamw``: the optimizer step is Composer's ``DecoupledAdamW`` (llm-foundry's
  ``decoupled_adamw``; mosaicml 0.17.2, ``composer/optim/decoupled_weight_decay.py``
  ``DecoupledAdamW.adamw``), not the fused multi-tensor Adam ``planner.perf.optimizer`` counts
  by default: a Python loop over the parameters running one eager kernel per operation, each
  moving its tensors at their element sizes (``m`` first moment, ``v`` second moment and the
  ``denom`` built from it, ``p`` the updated parameter, ``g`` the gradient): ``exp_avg.mul_``
  (2m), ``.add_(grad)`` (2m + g), ``exp_avg_sq.mul_`` (2v), ``.addcmul_(grad, grad)`` (2v + g),
  ``sqrt`` (2v), ``/ sqrt(bias_correction2)`` (2v), ``.add_(eps)`` (2v), ``param.addcdiv_``
  (2p + m + v), plus the gradient-norm pass (g) the default counts too: 5m + 11v + 2p + 3g, 84
  bytes with fp32 states and gradients (``param.mul_`` for a nonzero ``weight_decay`` would add
  2p; FSDP casts the fp32 shard to the 16-bit gather copy itself, so no 16-bit copy is written
  here). The moments are ``torch.zeros_like(p)`` (``DecoupledAdamW.step``, the same file @
  ``02c872e43c708781bba06355a4e673557f3d5056``), so a scenario that states the optimizer's
  dtypes moves its stated bytes through the same kernels.
* ``optimizer_grad_read``: which gradient the optimizer step (and its gradient-norm pass) reads
  under a master copy when the gradients are reduced in 16 bits (``grad_reduce_in_fp32``
  false), ``planner.perf.optimizer``. ``fp32_copy`` (Megatron-LM): Megatron-Core's
  ``Float16OptimizerWithFloat16Params`` and ``DistributedOptimizer``
  ``_copy_model_grads_to_main_grads`` give each fp32 main parameter ``main_grad.float()``, a
  new fp32 copy of the 16-bit gradient (shard) that the norm and Adam then read
  (``megatron/core/optimizer/optimizer.py``, ``distrib_optimizer.py`` @
  ``d98e8a64ddf34856e74b24714e3bedb2f5a39553``; the same cast in 2021's
  ``megatron/optimizer/optimizer.py`` @ ``b4bc51b1e710966b4985f0a09ad114362b3c75f9``, the
  release of the SC'21 runs); with the precision-aware optimizer (the
  scenario states the optimizer dtypes) it hands the 16-bit shard over as ``decoupled_grad``,
  which the norm (``get_main_grads_for_grad_norm``) and Transformer Engine's ``FusedAdam``
  (``step``: ``p.decoupled_grad``, v2.7) read as it is. ``as_reduced`` (NeMo): its optimizers
  read the reduced gradient in its own dtype: NeMo 1's Apex ``DistributedFusedAdam`` steps and
  takes the norm over its ``grads_shard`` in ``grad_sync_dtype``
  (``apex/contrib/optimizers/distributed_fused_adam.py`` ``_local_step_with_param_remainders``,
  ``_local_grad_norm`` @ ``6424da3b4faa6c8f062da4a48c424fff3f02d42d``), NeMo 2 / Megatron-Bridge
  Megatron-Core's precision-aware path above (the 2-byte master remainder the profile keeps is
  that optimizer's). Megatron-Bridge's performance scripts turn that optimizer on for bf16
  compute only (``scripts/performance/run_script.py`` @ v0.1.0rc3, ``utils/helpers.py`` @
  v0.2.0; the DeepSeek-V3 recipe sets it too); their FP8 runs keep Megatron-Core's fp32 copy
  and whole fp32 master, which this profile does not tell apart. ``fp32`` (the others): an fp32
  gradient, not checked per stack.
* ``recompute_early_stop``: under full recompute the stack checkpoints each layer with
  PyTorch's non-reentrant ``torch.utils.checkpoint``, whose recomputation stops as soon as
  every tensor the layer's backward saved is rebuilt ("By default, non-reentrant checkpoint
  stops recomputation as soon as it has computed all needed Tensors",
  ``set_checkpoint_early_stop``; made the default by pytorch/pytorch#96866, 2023-03-15, first
  released in torch 2.1). The last operator of a pre-norm layer that saves a tensor is the
  MLP down projection, and autograd saves its inputs before the GEMM runs, so the recompute
  ends before that GEMM (and the residual add after it): each layer re-runs its forward less
  the down projection's GEMM, ``(12 - 4)/12`` of a GPT layer's linear FLOPs (checked with
  torch 2.13 on the CPU: the recomputation's ``addmm`` calls are the QKV, output and up
  projections only). A linear that is a custom ``autograd.Function`` (Transformer Engine's
  ``te.Linear``) packs its saved tensors after its GEMM, so there the stop comes after the
  down projection and nothing is skipped: such a scenario states false. True for
  ``llm_foundry``: Composer wraps each block with
  ``checkpoint_wrapper(CheckpointImpl.NO_REENTRANT)`` when ``activation_checkpointing_reentrant``
  is false (``composer/trainer/dist_strategy.py``, mosaicml v0.16.4 and v0.17.2), which
  llm-foundry's MPT yamls set (``scripts/train/yamls/pretrain/mpt-*.yaml`` @ v0.3.0 and
  v0.4.0), and the checkpointed module is the whole ``MPTBlock``
  (``MPTForCausalLM.activation_checkpointing_fn``); llm-foundry 0.4.0 allows torch 1.13.1 to
  2.1.0 (``setup.py``) and its image (above) runs 2.1.0, as did the published runs since
  October 2023 (``benchmarks.accuracy.convert``). A scenario of an older torch states
  ``parallelism.recompute_early_stop: false``. Megatron's own ``tensor_parallel.checkpoint``
  (a reentrant ``autograd.Function``) re-runs the whole layer; torchtitan's full AC passes
  ``early_stop=False`` since pytorch/torchtitan@25413d224 (2025-08-29), still so at
  @b5bcd76c6 (``FullAC._wrap_block``, ``torchtitan/distributed/activation_checkpoint.py``; its
  earlier benchmark rows state true, ``benchmarks.accuracy.convert``); the other profiles are
  not checked: false.
* ``trains_with_dropout``: false when the framework's model code trains without dropout
  whatever the activation suggests (``ModelSpec.has_dropout``): llm-foundry's MPT has
  ``attn_pdrop``, ``resid_pdrop`` and ``emb_pdrop`` 0.0 by default (``MPTConfig``, llm-foundry
  0.4.0 ``configuration_mpt.py``; the benchmark YAMLs set none of them), and PyTorch's
  ``dropout`` with ``p = 0`` returns its input without a kernel (``at::dropout``). The model
  then charges no dropout kernels and stores no masks.
* ``zero3_list_collectives``: the ZeRO-3 parameter all-gather and gradient reduce-scatter pass
  lists of per-rank tensors to ``torch.distributed``: DeepSpeed 0.3-0.5 (2021, the version of
  the published DeepSpeed runs; ``partition_parameters.py`` ``_allgather_param`` gathers into
  ``[flat.narrow(0, i·partition, partition) for i in range(world_size)]``), which PyTorch's
  NCCL backend of the time serves through a flat buffer and one copy per rank
  (``planner.perf.data``). Later DeepSpeed gathers into one flat tensor
  (``all_gather_into_tensor``): a scenario of a current DeepSpeed would not pay it.
* ``loss_bytes_per_logit``: HBM bytes the loss moves per logit (forward + backward, on top of
  the LM-head GEMM), counted kernel by kernel from each stack's loss code:
  Megatron-Core's ``vocab_parallel_cross_entropy`` (r0.8, used by Megatron-LM 2024 and NeMo
  24.07) runs unfused fp32 PyTorch ops: ``.float()`` (2 read + 4 written), max (4), subtract
  max (4 + 4), exp (4 + 4), sum (4), divide (4 + 4); backward ``mul_`` by the upstream
  gradient (4 + 4) and the cast back to 16 bits (4 + 2): 52 bytes. Eager
  ``F.cross_entropy(logits.float())`` (torchtitan, plain FSDP/DeepSpeed): cast (6),
  log-softmax reading its input twice and writing fp32 (12), backward: the dense
  ``nll_loss`` gradient (4), ``log_softmax_backward`` (4 + 4 read, 4 written), cast back
  (6): 40 bytes; the same loss on the 16-bit logits without the upcast (``loss_upcast_fp32``
  false, NeMo Automodel's benchmark recipes): log-softmax (2 + 2 read, 2 written), the dense
  ``nll_loss`` gradient (2), ``log_softmax_backward`` (2 + 2 read, 2 written): 14 bytes.
  llm-foundry's MPT defaults to ``loss_fn: fused_crossentropy``
  (flash-attn's fused cross-entropy kernel: reads the 16-bit logits twice forward, writes the
  16-bit gradient in place backward): 10 bytes; and llm-foundry's MPT trains with
  ``use_train_metrics`` true (``modeling_mpt.py``: ``LanguageCrossEntropy`` and
  ``LanguagePerplexity``), which Composer updates after every microbatch's backward from the
  same logits (``trainer.py`` ``_train_microbatch`` -> ``_eval_train_metrics``, under the
  precision's autocast; each metric runs an eager ``torch.nn.CrossEntropyLoss`` over the
  16-bit logits, whose ``log_softmax`` autocast runs with an fp32 output (PyTorch
  ``autocast_mode.h``, ``AT_FORALL_FP32_SET_OPT_DTYPE``): three reads of 2 bytes and a 4-byte
  write, 10 bytes), 20 more: 30 bytes in all. XLA (MaxText)
  fuses the loss similarly: 10.

* ``grad_reduce_in_fp32``: with bf16 (or FP8 on bf16) parameters the stack accumulates
  gradients and reduces them across data-parallel ranks in fp32 (4 bytes per parameter) unless
  the scenario says otherwise (``parallelism.grad_reduce_in_fp32``). Megatron-LM: "bfloat16
  requires gradient accumulation and all-reduce to be done in fp32" (``arguments.py`` sets
  ``accumulate_allreduce_grads_in_fp32`` for ``--bf16``; ``--grad-reduce-in-bf16`` opts out);
  torchtitan: ``MixedPrecisionPolicy(reduce_dtype=float32)`` (``mixed_precision_reduce``
  default); Composer/llm-foundry: FSDP ``mixed_precision: DEFAULT`` reduces in fp32 (``PURE``
  in bf16); NeMo 24.07's distributed Adam and DeepSpeed ZeRO reduce in the 16-bit dtype
  (DeepSpeed ``communication_data_type`` unset). Under fp16 (loss scaling) every stack keeps
  16-bit gradients by default (Megatron-LM's ``main_grad`` buffer takes ``params_dtype``).

* ``master_weight_bytes``: bytes per parameter of the optimizer's fp32 master copy. NeMo's
  distributed Adam (Apex ``DistributedFusedAdam`` through NeMo's ``MegatronDistributedFusedAdam``)
  runs with ``store_params=False, store_param_remainders=True`` when the model is bf16 and the
  optimizer state fp32 (NeMo ``megatron_base_model.setup_optimization``): the bf16 parameter
  holds the upper 16 bits of the fp32 master and the optimizer only the lower 16 (2 bytes);
  NeMo Automodel keeps none (0, below); every other stack keeps the whole fp32 master (4).
* ``store_param_remainders``: the ``master_weight_bytes`` of 2 is an fp32 master kept as its
  low 16 bits beside the bf16 weight (NeMo's distributed Adam, above), so a scenario that
  states the optimizer's dtypes (``parallelism.main_params_dtype`` fp32 without
  ``store_param_remainders``) keeps the remainder under this framework. True for ``nemo``.
* ``zero3_master_weight_bytes``: the same under ZeRO-3, where a stack shards with another
  mechanism than its ZeRO-1 optimizer. ``nemo``'s ZeRO-3 is Megatron-FSDP (Megatron-Bridge
  ``use_megatron_fsdp``, ``data_parallel_sharding_strategy = "optim_grads_params"``), whose
  ``ParamAndGradBuffer`` keeps a sharded fp32 main-weight buffer while ``preserve_fp32_weights``
  holds (default True, ``distributed_data_parallel_config.py``; the buffer:
  ``megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py``
  ``_init_each_parameter_group_buffers``, NVIDIA/Megatron-LM @ ``core_v0.14.0`` and
  @ ``0d8e0714cd29``, the cores of NeMo 25.09 and 25.11). Megatron-Bridge clears it only under
  the precision-aware optimizer (``training/config.py``), which its performance scripts turn
  off under Megatron-FSDP (``scripts/performance/utils/helpers.py``, "Disabling precision
  aware optimizer because it cannot work with FSDP together", @ ``v0.1.0rc3`` and
  ``v0.2.0``): the whole fp32 master, 4 bytes, not the distributed Adam's 2-byte remainder.
  NeMo Automodel's FSDP2 keeps none (0): ``torch.optim.Adam`` updates the bf16 parameter
  shard itself (``fully_shard`` with ``MixedPrecisionPolicy(param_dtype=torch.bfloat16)`` over
  the bf16 model, ``nemo_automodel/components/moe/parallelizer.py`` @ ``36044ad3d1``), which
  ``planner.perf.memory`` counts among the weights, 2 bytes per owned parameter, as for a
  stated ``main_params_dtype: bf16`` (a profile with no master at any stage is read so,
  ``planner.perf.readers``); every other stack 4.
* ``zero3_model_weight_shard``: under ZeRO-3 the stack keeps its shard of the model weights
  (16-bit, or the FP8 parameter under ``parallelism.fp8_param_gather``) besides the fp32 master
  shard, which then is not the parameter itself: Megatron-FSDP's ``optim_grads_params``
  distributes both the model-weight and the main-weight buffers
  (``is_model_weight_buffer_distributed``, ``is_main_weight_buffer_distributed``, same file).
  PyTorch FSDP2 shards the fp32 parameter and gathers it cast to 16 bits (no 16-bit shard);
  DeepSpeed's 16-bit shard is ``zero3_gather_per_tensor``'s layout.
* ``adam_moment_bytes``: bytes per parameter of Adam's two moments: 8 (two fp32 moments) on
  every stack but NeMo Automodel's. Automodel's benchmark recipes run ``torch.optim.Adam``
  (``optimizer: _target_: torch.optim.Adam`` in every ``examples/benchmark/configs/*.yaml``
  @ ``89e3a9fdd6`` and @ ``2c236e081``, and every ``examples/llm_benchmark/**/*_te_deepep.yaml``
  @ ``36044ad3d1``, the Nemotron V3 recipes included) directly over the FSDP2 shards of a
  bf16 model: the MoE models' ``initialize_weights(dtype=torch.bfloat16)`` ends in
  ``self.to(dtype)`` and ``load_model_from_base_checkpoint`` calls it with that default
  (``nemo_automodel/components/models/{deepseek_v3,qwen3_moe,gpt_oss}/model.py``,
  ``components/checkpoint/checkpointing.py`` @ ``2c236e081``; @ ``36044ad3d1`` it passes the
  dtype the model was built in, which ``NeMoAutoModelForCausalLM.from_config`` makes bf16 for
  ``torch_dtype="auto"``, ``_transformers/auto_model.py``), and the MoE parallelizer's
  ``MixedPrecisionPolicy(param_dtype=torch.bfloat16, ...)`` keeps no fp32 copy
  (``components/moe/parallelizer.py``). ``torch.optim.Adam`` creates its state like the
  parameter (``state['exp_avg'] = torch.zeros_like(p, memory_format=torch.preserve_format)``,
  the same for ``exp_avg_sq``; pytorch/pytorch ``torch/optim/adam.py``), so the moments are
  bf16 (4 bytes for both) and there is no master (``master_weight_bytes`` 0): 4 bytes of
  optimizer state per owned parameter, against 12 with an fp32 master and fp32 moments.
* ``adam_foreach``: the optimizer step is ``torch.optim.Adam``/``AdamW`` with ``foreach``
  (the default on CUDA, ``_default_to_fused_or_foreach`` in ``torch/optim/optimizer.py``;
  ``DTensor`` joins ``_foreach_supported_types`` in ``torch/distributed/tensor/__init__.py``, so
  FSDP2 shards take it too). ``_multi_tensor_adam`` (``torch/optim/adam.py``, torch 2.13)
  updates the moments in place, then allocates ``exp_avg_sq_sqrt =
  torch._foreach_sqrt(device_exp_avg_sqs)``, one new tensor per owned parameter in the second
  moment's dtype, divides and offsets it in place and ``addcdiv_``s it into the parameters;
  the only other full list, ``device_grads = torch._foreach_add(grads, params)`` for coupled
  weight decay (``Adam`` with ``weight_decay`` != 0), is deleted before the square root
  ("Delete the local intermediate(s) ... to save on peak memory"). So the step holds one
  moment's bytes (``adam_moment_bytes / 2``) per owned parameter on top of the model states,
  after the activations are freed (``planner.perf.memory``). ``fused=True`` (one CUDA kernel
  per chunk, ``_fused_adam``) and Apex/Transformer Engine ``FusedAdam`` (Megatron, NeMo),
  DeepSpeed's ``FusedAdam`` and Composer's per-parameter loop (llm-foundry) allocate no such
  list. The scenario's ``parallelism.optimizer_implementation`` replaces this flag (and
  ``adam_foreach_tp1_only``) where stated (``planner.perf.readers``). False for ``torchtitan``:
  ``optimizer.implementation`` defaults to ``fused`` since pytorch/torchtitan@6e4988550
  (2025-02-24, "use Fused AdamW as default"), still so at @b5bcd76c6 (2026-08-21,
  ``OptimizersContainer.Config.implementation``, ``torchtitan/components/optimizer/
  optimizer.py``: ``fused=`` and ``foreach=`` of ``torch.optim.AdamW`` follow it); earlier
  checkouts (``--optimizer.fused`` off by default, ``"foreach": not fused``, ``9dec370a``
  ``torchtitan/optimizer.py``) ran foreach and state it (the Dec-2024 benchmark rows,
  ``benchmarks.accuracy.convert``). True for ``automodel``: ``torch.optim.Adam`` built with
  ``foreach=None`` (torch's default) unless ``tensor_parallel`` > 1 (``adam_foreach_tp1_only``;
  ``_foreach_for_mesh`` returns ``False`` then, ``nemo_automodel/components/optim/optimizer.py`` @
  ``36044ad3d1``). The plain ``fsdp`` profile leaves it off (no source for its optimizer).
* ``adam_foreach_tp1_only``: ``adam_foreach`` holds only at ``tensor_parallel`` 1.
* ``automodel`` (NVIDIA NeMo Automodel, 2025): a PyTorch-native stack, FSDP2 (``fully_shard``
  per block) with Transformer Engine modules where the recipe's ``backend`` picks them
  (``linear: te``, ``rms_norm: te``, ``attn: te``: cuDNN fused attention through TE's
  ``DotProductAttention``) and DeepEP for the MoE token exchange (``enable_deepep``); the glue
  between modules (residual adds, rotary embedding, the experts' SwiGLU, router softmax/top-k)
  runs as eager PyTorch (no ``torch.compile`` in the benchmark recipes); the benchmark recipes
  compute the loss with ``MaskedCrossEntropy`` and ``fp32_upcast: false``
  (``examples/benchmark/configs/*_te_deepep.yaml``: DeepSeek-V3, GPT-OSS 20B/120B, Qwen3-30B,
  Kimi-K2, Moonlight; ``nemo_automodel/components/loss/masked_ce.py``, NVIDIA-NeMo/Automodel @
  ``2c236e081``): eager ``F.cross_entropy`` on the 16-bit logits, not TE's fused
  ``parallel_cross_entropy`` (``loss_upcast_fp32`` false: 14 bytes per logit, peak 6), and
  FSDP2's ``MixedPrecisionPolicy`` reduces in fp32: the MoE recipes' parallelizer (``parallelizer:
  nemo_automodel.components.moe.parallelizer.parallelize_model``) shards every block with its
  own default ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``
  (``apply_fsdp`` @ ``89e3a9fdd6``; ``FSDP2Manager``'s own default, used by the dense
  parallelizer, reduces in bf16). Expert weights FSDP-sharded over ``ep_shard`` (data
  parallel above expert parallel) get no policy there: bf16 like the parameters. Its DeepEP experts
  (``GroupedExpertsDeepEP.forward``) run ``grouped_gemm.ops.gmm`` (NVIDIA-NeMo/Automodel
  ``nemo_automodel/components/moe/layers.py`` @ ``89e3a9fdd6``; ``pyproject.toml`` pins
  fanshiqing/grouped_gemm ``v1.1.4``), which on sm_90 launches one cuBLAS GEMM per expert,
  round-robin on ``NUM_STREAM`` 4 streams, from per-expert token counts it requires on the host
  (``csrc/grouped_gemm.cu`` @ ``v1.1.4``: "Use cuBLAS for SM90 until CUTLASS supports
  SM90-optimized grouped-gemm", ``TORCH_CHECK(batch_sizes.is_cpu())``); the counts come from
  DeepEP's host-side list (``fused_a2a.py``: ``torch.tensor(num_recv_tokens_per_expert_list)``):
  the same per-expert streams and host read as Transformer Engine's ``GroupedLinear``, so the
  same ``grouped_gemm_streams`` and host constants.

* ``chunk_grad_sync``: under the interleaved (virtual-pipeline) 1F1B schedule each model
  chunk's gradients are reduced as soon as that chunk's last backward is done, and each
  chunk's parameters gathered ahead of its first forward, instead of the stage's all together
  under the last microbatch's backward / first forward. NeMo 24.07 with its distributed Adam
  (Apex ``DistributedFusedAdam``, the performance recipes' optimizer) hands Megatron-Core's
  schedule ``grad_sync_func = reduce_overlap_gradients`` (``try_grad_sync``) and
  ``param_sync_func = sync_overlap_parameters`` (``_try_start_bucket_param_sync``: the
  all-gathers of the chunk's parameter buckets; nemo-toolkit 2.0.0rc1, ``megatron_gpt_model.py``
  ``fwd_bwd_step``, ``megatron_base_model.py``: "In the first pipeline stage, the grad sync is
  overlapped with the final backward pass. In other pipeline stages, the grad sync is deferred
  until the bubble overhead."), which Megatron-Core 0.8's
  ``forward_backward_pipelining_with_interleaving`` calls per chunk: the grad sync of a chunk
  after the backward of its last microbatch (``backward_step_helper``, launched at the same
  time on every pipeline rank), the parameter sync of chunk ``c+1`` at the first forward of
  chunk ``c`` (chunks 0 and 1 before the schedule; ``forward_step_helper``). How much hides is
  in ``planner.perf.data``. Megatron-LM's own ``--delay-grad-reduce`` path is the same code,
  but its default is not in the Megatron-Core wheel: the ``megatron`` profile leaves it off.
* ``wgrad_accumulation_fusion``: the weight-gradient GEMMs add into the gradient buffer
  (``main_grad``) every microbatch instead of writing a 16-bit gradient: Megatron-Core's
  ``gradient_accumulation_fusion`` (Megatron-LM ``--no-gradient-accumulation-fusion`` turns it
  off, so on by default; NeMo's recipes set ``gradient_accumulation_fusion: True``), run as
  ``wgrad_gemm_accum_fp32`` (``LinearWithGradAccumulationAndAsyncCommunication.backward``) or
  Transformer Engine's ``fuse_wgrad_accumulation`` (``TELinear``, ``TEGroupedLinear``: a GEMM
  with ``accumulate=True`` into ``main_grad``). The GEMM reads and writes the buffer
  (``planner.perf.optable``). PyTorch stacks write the gradient and add it in a separate
  AccumulateGrad kernel from the second microbatch on; that add is not modelled.
* ``grouped_gemm_streams``: how the stack runs ``--moe-grouped-gemm`` experts. Megatron-Core's
  ``TEGroupedMLP`` calls Transformer Engine's ``GroupedLinear``, whose default path reads the
  per-expert token counts on the host, quantises each expert's input on its own and launches
  one cuBLAS GEMM per expert, round-robin on a pool of ``num_streams = 4`` CUDA streams
  (NVIDIA/TransformerEngine ``transformer_engine/common/include/transformer_engine/gemm.h``
  @ ``1a540000f43c``: ``constexpr int num_streams = 4``; ``common/gemm/cublaslt_gemm.cu``
  @ ``5c62f7283a65``, ``nvte_multi_tensor_gemm``: "Currently only support cutlass group gemm on
  Hopper Arch", and only under ``NVTE_USE_CUTLASS_GROUPED_GEMM=1``, default off). At most 4
  experts' tiles share the SMs at a time, so each wave is quantised over those 4 GEMMs, not
  over every local expert as one grouped kernel would be (``planner.perf.moe_mlp``). 0: one
  grouped kernel over all local experts (CUTLASS/``torch._grouped_mm``-style stacks).
* ``expert_up_bias_in_gemm``: with expert biases (``model.moe_expert_bias``), the grouped
  GEMM of the experts' up projection adds its bias itself. Megatron-Core's ``TEGroupedMLP``
  builds ``linear_fc1`` with ``bias=add_bias_linear, skip_bias_add=False`` (Transformer
  Engine's ``GroupedLinear`` adds it in the GEMM, its gradient from the same backward), and
  ``linear_fc2`` with ``skip_bias_add=True``, whose bias ``TEGroupedMLP._apply_bias`` then
  adds in eager PyTorch, split per local expert (NVIDIA/Megatron-LM
  ``megatron/core/transformer/moe/experts.py`` @ ``core_v0.15.0``). NeMo Automodel's
  ``GroupedExpertsDeepEP`` adds both biases that way, after grouped GEMMs without bias
  (``ops.gmm``; NVIDIA-NeMo/Automodel ``nemo_automodel/components/moe/layers.py`` @
  ``2c236e081``). False: the up projection's bias is an eager add too
  (``planner.perf.moe_mlp``).
* ``yarn_rope_unfused``: YaRN rotary embeddings (``model.rope_type`` ``yarn``) run Megatron-Core's
  unfused rotary path even where the recipe asks for the fused kernel: Megatron-Bridge's
  ``GPTModelProvider.provide`` turns ``apply_rope_fusion`` off for any
  ``position_embedding_type`` but ``rope`` (``utils/fusions.py``
  ``validate_rope_fusion_compatibility``; GPT-OSS's provider sets ``yarn``), after the
  performance scripts' ``set_common_perf_overrides`` set it on (NVIDIA-NeMo/Megatron-Bridge
  @ ``v0.2.0``). The path is ``_apply_rotary_pos_emb_bshd`` (NVIDIA/Megatron-LM
  ``megatron/core/models/common/embeddings/rope_utils.py`` @ ``core_v0.15.0``):
  ``planner.perf.operators`` ``UNFUSED_ROPE_BYTES``. Megatron-LM's own launcher is not known
  to refuse the fusion for ``--rope-type yarn``: false there.
* ``activation_clamp_eager``: a clamped gated activation (``model.activation_func_clamp_value``)
  is clamped in eager PyTorch before the fused activation kernel: Megatron-Core's
  ``weighted_bias_quick_geglu_impl`` splits the experts' up-projection output with
  ``chunk``, clamps each half and concatenates them again with ``torch.cat`` outside the
  ``torch.compile``d quick-GeGLU (NVIDIA/Megatron-LM
  ``megatron/core/fusions/fused_bias_geglu.py`` @ ``core_v0.15.0``, called by
  ``TEGroupedMLP`` under ``bias_activation_fusion``, which Megatron-Bridge's
  ``GPTOSSProvider`` sets). NeMo Automodel clamps inside its compiled ``quick_geglu_deepep``
  (``nemo_automodel/components/moe/layers.py`` @ ``2c236e081``): false.
* ``flex_attention_for_sinks``: a model with an attention sink (``model.softmax_type``
  ``learnable`` / ``off_by_one``) runs PyTorch's FlexAttention (Triton-generated; on H100 85 %
  of FlashAttention-3's forward and 76 % of its backward: ``planner.perf.attention``
  ``FLEX_ATTENTION_RELATIVE``) instead of the stack's fused kernel, with the sink applied
  outside it. NeMo Automodel's GPT-OSS attention accepts only that backend
  (``GptOssAttention``: ``assert backend.attn == "flex"``, every GPT-OSS benchmark recipe sets
  ``attn: flex``; ``FlexAttention.forward`` rescales the output by ``sigmoid(lse - sink)`` in
  eager PyTorch: NVIDIA-NeMo/Automodel ``nemo_automodel/components/models/gpt_oss/layers.py``,
  ``components/attention/flex_attention.py``, ``examples/benchmark/configs/gptoss_*`` @
  ``2c236e081``). Megatron-Core and NeMo keep Transformer Engine's fused attention: TE 2.8+
  passes the softmax offset to cuDNN's fused kernel, which supports it from cuDNN 9.13.1
  (NVIDIA/TransformerEngine ``transformer_engine/common/fused_attn/fused_attn.cpp`` @
  ``v2.9``); NeMo 25.11 ships TE 2.9 with cuDNN 9.13.1.26 (NVIDIA-NeMo/Megatron-Bridge
  ``docs/releases/software-versions.md`` @ ``v0.2.0``). Where the scenario states an older
  stack nothing here knows it: Megatron-Bridge's ``GPTOSSProvider`` falls back to
  Megatron-Core's unfused local attention below TE 2.8.
* ``moe_host_forward_s``, ``moe_host_expert_forward_s``: the host's time to issue one MoE
  layer's forward, seconds: a fixed part and one per local expert. Megatron-Core's all-to-all
  dispatcher copies the per-expert token counts to the host and waits for them once per MoE
  layer forward (``MoEAlltoAllTokenDispatcher._maybe_dtoh_and_synchronize``,
  NVIDIA/Megatron-LM ``megatron/core/transformer/moe/token_dispatcher.py`` @ ``0014f13713bf``;
  the backward reuses the host lists; only drop-and-pad routing, a capacity factor with
  ``moe_pad_expert_input_to_capacity``, skips it), and Transformer Engine's ``GroupedLinear``
  takes them as the host list ``m_splits`` and launches one GEMM per expert. After the wait the
  host cannot run ahead of the GPU, so a MoE layer's forward takes at least this host time
  (``planner.perf.moe_mlp.moe_host_exposed_s``). Measured on a lent H200 (x86 host, PyTorch
  2.11; ``benchmarks/moe_layer_h200.py``, ``benchmarks/results/moe_layer_h200.json``): the
  Qwen3-30B-A3B layer at micro-batch 1 (16 local experts, 2.2 ms of forward GPU work) takes
  2.3 ms per layer forward with one grouped kernel per GEMM and 3.7-5.7 ms with a host read and
  per-expert GEMMs over 4 streams (4.2 ms without the read: the per-expert launches alone
  outrun the GPU), so 2.0 ms fixed and 0.17 ms per local expert at the mean; at micro-batch 4
  its 8 ms of GPU work hide the host. A stand-in for Transformer Engine's path (not
  installable there) on that machine's host, not the runs' hosts: the Megatron-Bridge Qwen3-30B
  rows on B200 at micro-batch 1 take 4.7 ms (25.09) and 9.2 ms (25.11) per layer forward and
  backward, this term gives 4.7 ms for the forward alone.
* ``moe_router_forward_kernels``, ``moe_flex_router_forward_kernels``: kernels one MoE
  router's forward launches (the gate GEMM apart), under the all-to-all / all-gather
  dispatchers and under the flex dispatcher (DeepEP / HybridEP), where they count the token
  dispatch's preprocessing too. Each takes at least ``kernel_min_time_s``: at a few thousand
  tokens the router's logits are a few MB, so the kernel count, not the bytes, sets its time.
  Megatron-Core with Transformer Engine: 31 with ``--moe-router-fusion`` (72 without),
  17 for the router and the preprocessing with DeepEP's fused preprocessing kernel (HybridEP,
  the other flex backend, taken as DeepEP). Source: DeepSeek-V3's router on GB200,
  "Optimizing DeepSeek-V3 Training Performance on NVIDIA GB200 NVL72", NVIDIA/Megatron-LM
  ``docs/discussions/deepseek-v3-gb200-optimization/deepseek-v3-gb200-optimization.md`` @
  ``eb0783b6d356``, sections 2.1.4 and 2.2.1; the fusion is TE's ``#1883``, in TE 2.6 and
  later. The Megatron-Bridge performance recipes of NeMo 25.09 and 25.11 set
  ``moe_router_fusion`` (NVIDIA-NeMo/Megatron-Bridge ``scripts/performance/configs/`` @
  ``v0.1.0rc3`` and ``v0.2.0``); unfused, the same router launches more (72), so the profiles
  take 31 for either. An assumption: DeepSeek-V3's router (group-limited sigmoid scores, expert
  bias, sequence auxiliary loss), the only published count, stands in for every router
  configuration; a plain top-k softmax router may launch fewer. The backward's count is not
  published: it keeps the 3 kernels (score, top-k, auxiliary loss) the other stacks' forward
  and backward have.
* ``grad_buffer_memset`` and ``loss_all_reduce_per_microbatch``: Megatron-Core's training step
  (Megatron-LM, NeMo) zeroes its contiguous gradient buffer every iteration and all-reduces the
  reporting loss over the data-parallel group after every microbatch (``pretrain_gpt.py``
  ``loss_func``); PyTorch stacks free their gradients (``set_to_none``) and reduce the loss
  once per logged step (``planner.perf.iteration``).

Memory (``planner.perf.memory``):

* ``fused_cross_entropy``: the loss is a fused kernel that holds about 4 bytes per logit:
  Megatron's fused vocab-parallel cross-entropy keeps one fp32 copy of the logits and works in
  place; flash-attn's fused cross-entropy (llm-foundry's MPT ``loss_fn`` default) keeps the
  16-bit logits and writes the 16-bit gradient. Eager ``F.cross_entropy(logits.float())``
  (torchtitan ``train.py``, Dec 2024) peaks in its backward at 12 bytes per logit, 16 under
  DTensor ``loss_parallel`` (``planner.perf.memory``).
* ``fused_norms``: on a stack whose other element-wise ops are eager, the layer norms (the
  per-head query/key norms and MLA's latent norms too) are Transformer Engine kernels, at a
  fused kernel's traffic: NeMo Automodel's benchmark recipes set ``rms_norm: te``
  (``examples/benchmark/configs/*_te_deepep.yaml``), and ``initialize_rms_norm_module`` then
  builds ``transformer_engine.pytorch.module.rmsnorm.RMSNorm`` for every norm of the layer
  (``nemo_automodel/components/moe/utils.py``, NVIDIA-NeMo/Automodel @ ``2c236e081``).
* ``loss_upcast_fp32``: an eager loss casts the 16-bit logits to fp32 first (``.float()``;
  torchtitan, plain FSDP/DeepSpeed); false: ``F.cross_entropy`` runs on the 16-bit logits
  (NeMo Automodel's ``MaskedCrossEntropy(fp32_upcast=False)``), its backward peak 6 bytes per
  logit (``planner.perf.loss_memory``).
* ``fp8_weight_cache``: under FP8 training, Transformer Engine keeps a quantised copy of every
  linear weight across the microbatches of a step only when the caller says which microbatch
  is the first (TE ``Linear.forward(..., is_first_microbatch=None)``: "when set, ... it allows
  caching of the FP8 versions of the weights"; the default ``None`` caches nothing).
  Megatron-Core sets it (``MegatronModule.set_is_first_microbatch``, called by
  ``pipeline_parallel/schedules.py`` on each step's first microbatch: "TE modules will update
  their fp8 parameter cache"; NeMo runs the same modules); llm-foundry 0.4 does not
  (``llmfoundry/models/layers/fc.py`` registers ``te.Linear`` as a plain ``fc_type`` called
  without it), nor does a plain PyTorch (FSDP) loop; torchao's float8 linears (torchtitan)
  cast each weight when the layer runs and keep nothing. DeepSpeed keeps the cache (unknown
  for its TE integrations; the published DeepSpeed runs are 16-bit).
* ``op_level_selective_recompute``: "selective" recompute means torchtitan's op-level selective
  activation checkpointing (``selective_ac_option = "op"``: save the outputs of matmuls, except
  every second one, and of the attention kernel; recompute element-wise ops), not Megatron's
  recompute of the attention core: the backward re-runs the even-numbered matmuls, the
  element-wise forward around them and, under sequence parallelism, the all-gathers of their
  inputs (``planner.perf.operators``, ``planner.perf.tensor``); what it keeps is in
  ``planner.perf.memory``.
* ``separate_qkv_projections``: the attention's query, key and value projections are three
  linears, each its own GEMM over the same input, not one fused QKV GEMM. Under tensor
  parallelism a GQA model's key and value GEMMs are narrow (Llama 3 at TP 8: 128 columns) and
  memory-bound. False for every profile: current torchtitan builds one fused ``wqkv`` for
  Llama 3, Qwen3 and GPT-OSS by default (``fuse_qkv=True`` since pytorch/torchtitan@3396a4b37,
  2026-06-24; ``make_gqa_config`` / ``FusedQKVLinear``, ``torchtitan/models/common/
  config_utils.py`` and ``attention.py``, ``torchtitan/models/llama3/__init__.py`` @
  ``b5bcd76c6``), as the Transformer Engine stacks do (``linear_qkv``). Earlier torchtitan
  ran ``Attention.wq`` / ``wk`` / ``wv`` (``torchtitan/models/llama/model.py`` @
  ``9dec370a``, ``torchtitan/models/llama3/model.py`` @ ``820504e2`` and @ ``e7c0cae9``),
  which ``apply_tp`` shards each as its own ``ColwiseParallel`` linear; a scenario of such a
  checkout states ``parallelism.separate_qkv_projections`` (the torchtitan benchmark rows do,
  ``benchmarks.accuracy.convert``). torch.compile keeps separate linears apart: Inductor's
  pre-grad fusions are off by default (``pre_grad_fusion_options`` empty,
  ``torch/_inductor/config.py``, PyTorch 2.13 as installed here; releases of 2024 that enabled
  ``batch_linear`` would batch ``wk`` with ``wv``, the same width).
* ``separate_gate_up_projections``: a gated MLP's gate and up projections are two linears, two
  GEMMs of ``f/t`` columns, not one: torchtitan's ``FeedForward.w1`` / ``w3`` at its benchmark
  commits (the files above) and still at ``b5bcd76c6`` (``torchtitan/models/common/
  feed_forward.py``; 3396a4b37 fused gate and up only in its RL experiment's overrides). The
  scenario's ``parallelism.separate_gate_up_projections`` replaces it where stated.
* ``fp8_tp_all_gather``: with tensorwise (current-scaling) FP8 linears, the sequence-parallel
  all-gathers of the tensor-parallel layers move FP8, one byte per element. False for every
  profile: current torchtitan offers no tensorwise recipe (``Float8LinearConverter.Config.
  recipe_name`` is ``rowwise`` or ``rowwise_with_gw_hp`` since pytorch/torchtitan@6348d93d1,
  2026-04-27) and shards by dtype-agnostic configs (``ShardingConfig``: "quantization
  (Float8/MXFP8) is orthogonal", ``torchtitan/protocols/sharding.py`` @ ``b5bcd76c6``; torchao's
  float8 tensor-parallel styles left ``apply_tp`` in @1786292db and @8e820844e), so its
  all-gathers carry the 16-bit activations. Earlier torchtitan applied torchao's
  ``PrepareFloat8ModuleInput`` / ``Float8ColwiseParallel`` / ``Float8RowwiseParallel`` when its
  float8 converter ran a tensorwise recipe (``torchtitan/models/llama3/parallelize_llama.py``
  ``apply_tp`` @ ``820504e2`` and @ ``e7c0cae9``, ``enable_float8_tensorwise_tp``;
  ``torchtitan/parallelisms/parallelize_llama.py`` @ ``9dec370a``, where float8 was tensorwise
  only), which cast the block's input to float8 before the forward all-gather and the gradient
  of the block's output before the backward's all-gather (``torchao/float8/
  float8_tensor_parallel.py``: ``_hp_tensor_to_float8_dynamic`` before ``redistribute``;
  ``_NoopFwToFloat8BwDynamic`` after the row-wise output's); a scenario of such a checkout
  states ``parallelism.fp8_tp_all_gather`` (the torchtitan benchmark rows do,
  ``benchmarks.accuracy.convert``). The reduce-scatters sum 16-bit values and stay 16-bit.
* ``fp8_norm_fused_cast``: under FP8 training the norm in front of the QKV projection (under
  MLA: of the query and key/value up-projections) and of a dense MLP's FC1 quantises its own
  output, since the stack builds those GEMMs as Transformer Engine ``LayerNormLinear``
  modules: Megatron-Core's Transformer Engine layer spec (``linear_qkv`` and the dense
  ``linear_fc1`` are ``column_parallel_layer_norm_linear``, i.e.
  ``TELayerNormColumnParallelLinear``, with the separate ``input_layernorm`` /
  ``pre_mlp_layernorm`` an ``IdentityOp``; MoE layers keep a separate pre-MLP norm, MLA a
  separate input norm before plain down-projections: NVIDIA/Megatron-LM
  ``megatron/core/models/gpt/gpt_layer_specs.py`` @ ``00611e6eeb0b``), which NeMo and
  Megatron-Bridge build too. What the fused cast costs by recipe is in
  ``planner.perf.precision``. torchao's float8 linears (torchtitan), llm-foundry's
  ``te.Linear`` and eager stacks cast the norm's 16-bit output in a kernel of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from planner.specs.scenario import Framework

__all__ = ["FRAMEWORK_PROFILES", "FrameworkProfile", "profile_of"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameworkProfile:
    """Kernel-level properties of a training framework (see the module docstring)."""

    fused_attention: bool
    fused_elementwise: bool
    tp_comm_overlap: bool
    fused_cross_entropy: bool
    fp8_weight_cache: bool
    op_level_selective_recompute: bool = False
    recompute_early_stop: bool = False
    flash_attention_v1: bool = False
    zero3_gather_per_tensor: bool = False
    pp_comm_overlap: bool = False
    loss_bytes_per_logit: float = 40.0
    grad_reduce_in_fp32: bool = True
    zero3_prefetch_params: float = 0.0
    zero3_regather_on_recompute: bool = False
    master_weight_bytes: float = 4.0
    store_param_remainders: bool = False
    zero3_master_weight_bytes: float = 4.0
    zero3_model_weight_shard: bool = False
    adam_moment_bytes: float = 8.0
    adam_foreach: bool = False
    adam_foreach_tp1_only: bool = False
    grad_buffer_memset: bool = False
    loss_all_reduce_per_microbatch: bool = False
    zero3_list_collectives: bool = False
    zero3_lock_step: bool = False
    dp_bucket_min_params: float = 6.25e6
    dp_bucket_params_per_rank: float = 0.0
    overlap_grad_reduce: bool = True
    chunk_grad_sync: bool = False
    zero3_backward_prefetch_post: bool = False
    trains_with_dropout: bool = True
    zero3_grad_prep_pass: bool = False
    zero3_accumulate_unsharded: bool = False
    eager_decoupled_adamw: bool = False
    optimizer_grad_read: str = "fp32"
    wgrad_accumulation_fusion: bool = False
    grouped_gemm_streams: float = 0.0
    moe_host_forward_s: float = 0.0
    moe_host_expert_forward_s: float = 0.0
    moe_router_forward_kernels: float = 3.0
    moe_flex_router_forward_kernels: float = 3.0
    fp8_tp_all_gather: bool = False
    fp8_norm_fused_cast: bool = False
    expert_up_bias_in_gemm: bool = False
    flex_attention_for_sinks: bool = False
    activation_clamp_eager: bool = False
    yarn_rope_unfused: bool = False
    loss_upcast_fp32: bool = True
    fused_norms: bool = False
    separate_qkv_projections: bool = False
    separate_gate_up_projections: bool = False


_TE_STACK = FrameworkProfile(
    fused_attention=True,
    fused_elementwise=True,
    tp_comm_overlap=True,
    fused_cross_entropy=True,
    fp8_weight_cache=True,
    loss_bytes_per_logit=52.0,
    grad_buffer_memset=True,
    loss_all_reduce_per_microbatch=True,
    wgrad_accumulation_fusion=True,
    grouped_gemm_streams=4.0,
    moe_host_forward_s=2.0e-3,
    moe_host_expert_forward_s=0.17e-3,
    moe_router_forward_kernels=31.0,
    moe_flex_router_forward_kernels=17.0,
    expert_up_bias_in_gemm=True,
    activation_clamp_eager=True,
    dp_bucket_min_params=4e7,
    dp_bucket_params_per_rank=1e6,
    fp8_norm_fused_cast=True,
    optimizer_grad_read="fp32_copy",
)
_EAGER_PYTORCH = FrameworkProfile(
    fused_attention=False,
    fused_elementwise=False,
    tp_comm_overlap=False,
    fused_cross_entropy=False,
    fp8_weight_cache=False,
)
_LLM_FOUNDRY = FrameworkProfile(
    fused_attention=False,
    fused_elementwise=False,
    tp_comm_overlap=False,
    fused_cross_entropy=True,  # flash-attn's fused cross-entropy (``loss_fn`` default)
    fp8_weight_cache=False,
    flash_attention_v1=True,
    loss_bytes_per_logit=30.0,  # fused loss 10 + Composer's two training metrics 20
    zero3_backward_prefetch_post=True,
    trains_with_dropout=False,  # MPTConfig: attn_pdrop, resid_pdrop, emb_pdrop default 0.0
    zero3_grad_prep_pass=True,
    eager_decoupled_adamw=True,
    recompute_early_stop=True,
)
_TORCHTITAN = FrameworkProfile(
    fused_attention=False,
    fused_elementwise=False,
    tp_comm_overlap=False,
    fused_cross_entropy=False,
    fp8_weight_cache=False,
    op_level_selective_recompute=True,
    # as current torchtitan runs (pytorch/torchtitan@b5bcd76c6, 2026-08-21): fused AdamW by
    # default since @6e4988550, full AC without early stop since @25413d224, one fused wqkv
    # since @3396a4b37 beside separate w1 / w3, no FP8 tensor-parallel all-gathers since
    # @6348d93d1; a scenario of an earlier checkout states its optimizer_implementation,
    # recompute_early_stop, separate_qkv_projections and fp8_tp_all_gather (field notes above)
    adam_foreach=False,
    recompute_early_stop=False,
    separate_qkv_projections=False,
    separate_gate_up_projections=True,
    fp8_tp_all_gather=False,
)

FRAMEWORK_PROFILES: Mapping[Framework, FrameworkProfile] = MappingProxyType(
    {
        Framework.MEGATRON: _TE_STACK,
        Framework.NEMO: replace(
            _TE_STACK,
            yarn_rope_unfused=True,
            pp_comm_overlap=True,
            grad_reduce_in_fp32=False,
            master_weight_bytes=2.0,
            store_param_remainders=True,
            zero3_model_weight_shard=True,
            chunk_grad_sync=True,
            optimizer_grad_read="as_reduced",
        ),
        Framework.TORCHTITAN: _TORCHTITAN,
        Framework.FSDP: _EAGER_PYTORCH,
        Framework.DEEPSPEED: FrameworkProfile(
            fused_attention=False,
            fused_elementwise=False,
            tp_comm_overlap=False,
            fused_cross_entropy=False,
            fp8_weight_cache=True,
            zero3_gather_per_tensor=True,
            grad_reduce_in_fp32=False,
            zero3_prefetch_params=5e7,
            zero3_regather_on_recompute=True,
            zero3_list_collectives=True,
            zero3_lock_step=True,
            dp_bucket_min_params=5e8,
            overlap_grad_reduce=False,
        ),
        Framework.LLM_FOUNDRY: _LLM_FOUNDRY,
        Framework.AUTOMODEL: replace(
            _EAGER_PYTORCH,
            fused_attention=True,
            flex_attention_for_sinks=True,
            fused_norms=True,
            fused_cross_entropy=False,
            loss_upcast_fp32=False,
            loss_bytes_per_logit=14.0,
            grouped_gemm_streams=_TE_STACK.grouped_gemm_streams,
            moe_host_forward_s=_TE_STACK.moe_host_forward_s,
            moe_host_expert_forward_s=_TE_STACK.moe_host_expert_forward_s,
            zero3_accumulate_unsharded=True,
            master_weight_bytes=0.0,
            zero3_master_weight_bytes=0.0,
            adam_moment_bytes=4.0,
            adam_foreach=True,
            adam_foreach_tp1_only=True,
        ),
        # XLA fuses element-wise ops and ships cuDNN/Pallas attention; no collective-matmul
        # overlap assumed.
        Framework.MAXTEXT: FrameworkProfile(
            fused_attention=True,
            fused_elementwise=True,
            tp_comm_overlap=False,
            fused_cross_entropy=True,
            fp8_weight_cache=False,
            loss_bytes_per_logit=10.0,
        ),
        Framework.OTHER: _EAGER_PYTORCH,
    }
)
"""Profile of every framework the scenario format names."""


def profile_of(framework: Framework) -> FrameworkProfile:
    """The profile of ``framework`` (eager PyTorch for anything unlisted)."""
    return FRAMEWORK_PROFILES.get(framework, _EAGER_PYTORCH)
