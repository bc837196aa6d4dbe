# Fetch rules. They run on the submitting machine (cluster nodes often have no internet)
# and write a small JSON record of what they found. Offline they fail at once with the URL
# and the folder to put the files in by hand. The quick scale needs none of them: it uses
# scikit-learn's bundled digits wherever a paper uses MNIST.

rule fetch_torchvision:
    """Fetch MNIST, CIFAR-10 or CIFAR-100 with torchvision (offline: say where to put the files)."""
    output:
        f"{DATA}/fetched/{{dataset}}.json",
    wildcard_constraints:
        dataset="|".join(TORCHVISION_DATASETS),
    log:
        log_file("datasets/{dataset}"),
    localrule: True
    conda:
        "../../envs/datasets.yaml"
    script:
        "../scripts/fetch_dataset.py"


rule fetch_tiny_imagenet:
    """Fetch Tiny ImageNet from its official zip, MD5-checked, validation images one folder per class."""
    output:
        f"{DATA}/fetched/tiny_imagenet.json",
    log:
        log_file("datasets/tiny_imagenet"),
    localrule: True
    conda:
        "../../envs/datasets.yaml"
    script:
        "../scripts/fetch_dataset.py"


# ImageNet (RP-T8, optional) cannot be downloaded by a rule: this one checks that it was put under
# data_dir/imagenet/{train,val}/<class>/ by hand and says where to put it otherwise.
rule fetch_imagenet:
    """Check that ImageNet was put under data_dir/imagenet/ by hand (RP-T8), or say where it goes."""
    output:
        f"{DATA}/fetched/imagenet.json",
    log:
        log_file("datasets/imagenet"),
    localrule: True
    conda:
        "../../envs/datasets.yaml"
    script:
        "../scripts/fetch_dataset.py"


rule datasets:
    """Every dataset the paper scale needs: MNIST, CIFAR-10, CIFAR-100, Tiny ImageNet."""
    input:
        lambda w: [f for name in TORCHVISION_DATASETS + ["tiny_imagenet"] for f in dataset_input(name)],
    localrule: True
