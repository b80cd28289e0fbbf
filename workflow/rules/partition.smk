# Placement, computed once before training: samples -> workers, keys -> server shards.


rule partition:
    input:
        unpack(run_data),
        spec=f"results/{TIER}/specs/partition/{{workload}}/{{method}}.json",
    output:
        assignment=f"results/{TIER}/partition/{{workload}}/{{method}}.npz",
        traffic=f"results/{TIER}/partition/{{workload}}/{{method}}.json",
    log:
        f"logs/{TIER}/partition/{{workload}}/{{method}}.log",
    benchmark:
        f"logs/{TIER}/bench/partition/{{workload}}/{{method}}.tsv"
    conda:
        RULE_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        data_dir=parent_dir,
    shell:
        "psml partition --run {input.spec} --data {params.data_dir} "
        "--out {output.assignment} --traffic {output.traffic} > {log} 2>&1"
