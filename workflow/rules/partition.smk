# Placement, computed once before training: samples -> workers, keys -> server shards. One job
# per distinct placement key (common.smk's PLACEMENT_OF): the recipes that place alike share it.


rule partition:
    input:
        unpack(placement_data),
        spec=f"results/{TIER}/specs/partition/{{workload}}/{{placement}}.json",
    output:
        assignment=f"results/{TIER}/partition/{{workload}}/{{placement}}.npz",
        traffic=f"results/{TIER}/partition/{{workload}}/{{placement}}.json",
    log:
        f"logs/{TIER}/partition/{{workload}}/{{placement}}.log",
    benchmark:
        f"logs/{TIER}/bench/partition/{{workload}}/{{placement}}.tsv"
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
