# Training: one job per workload x method x scenario x seed.


rule train:
    input:
        unpack(run_data),
        partition=partition_of,
        # Written when the workflow is read, or by run_spec after a tune job (specs.smk).
        spec=run_spec_of,
        traces=delay_traces,
        calibration=calibration_of,
        costs=cost_files,
    output:
        metrics=f"{RUN_WILDCARDS}/metrics.parquet",
        summary=f"{RUN_WILDCARDS}/summary.json",
    log:
        layout.wildcards(layout.LOG, tier=TIER, job=f"train/{layout.RUN_ID}"),
    benchmark:
        layout.wildcards(layout.BENCH, tier=TIER, job=f"train/{layout.RUN_ID}")
    conda:
        TRAIN_ENV
    threads: train_threads
    resources:
        # SLURM tasks: P + S for dist, with `mpi` (see TRAIN_TASKS), else one.
        **TRAIN_TASKS,
        # One GPU (and the GPU partition) only where the run computes on one.
        **TRAIN_GPU,
        # Sized from the run: torch's threads per task, the job's measured (or estimated) peak.
        cpus_per_task=train_cpus,
        mem_mb=train_memory,
        runtime=60,
        # How a dist run starts its ranks: "local" spawns them; the slurm profile sets "srun".
        launcher="local",
    params:
        data_dir=parent_dir,
        out_dir=out_dir,
        calibration=calibration_arg,
    shell:
        "psml train --run {input.spec} --data {params.data_dir} "
        "--partition {input.partition} --out {params.out_dir} --launcher {resources.launcher} "
        "{params.calibration} > {log} 2>&1"
