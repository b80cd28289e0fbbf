# Training: one job per workload x method x scenario x seed.


rule train:
    input:
        unpack(prepared),
        partition=f"results/{TIER}/partition/{{workload}}/{{method}}.npz",
    output:
        metrics=f"results/{TIER}/runs/{{workload}}/{{method}}/{{scenario}}/seed{{seed}}/metrics.parquet",
        summary=f"results/{TIER}/runs/{{workload}}/{{method}}/{{scenario}}/seed{{seed}}/summary.json",
    log:
        f"logs/{TIER}/train/{{workload}}/{{method}}/{{scenario}}/seed{{seed}}.log",
    benchmark:
        f"logs/{TIER}/bench/train/{{workload}}/{{method}}/{{scenario}}/seed{{seed}}.tsv"
    conda:
        "../envs/psml.yaml"
    threads: train_threads
    resources:
        mem_mb=4000,
        runtime=60,
        tasks=1,
    params:
        run=run_json,
        data_dir=parent_dir,
        out_dir=out_dir,
    shell:
        "psml train --run {params.run:q} --data {params.data_dir} "
        "--partition {input.partition} --out {params.out_dir} > {log} 2>&1"
