"""cdk-nag AwsSolutions checks on the platform, and every finding we acknowledge, each with its reason.

Synth fails on any finding not acknowledged here (``Validations.of(app)``
policy validation). Acknowledgments are per finding and per construct path,
never blanket: a new finding anywhere fails the build until someone reads it.
"""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct


def add_checks(app: cdk.App) -> None:
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def _ack(scope: IConstruct, finding: str, reason: str) -> None:
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=finding, reason=reason))
    stack = cdk.Stack.of(scope)
    if not hasattr(stack, "nag_acknowledgments"):
        stack.nag_acknowledgments = []
    stack.nag_acknowledgments.append((scope.node.path, finding, reason))


def acknowledge(stack: cdk.Stack) -> None:
    """Acknowledge the findings that are deliberate in this design (``stack``: an ``infra.app.stacks.PlatformStack``,
    not imported here: stacks imports this module)."""
    # CDK's built-in CloudFormation validation (cfn-lint rules) runs beside cdk-nag.
    cdk.Validations.of(stack.network.vpc).acknowledge(cdk.Acknowledgment(
        id="CloudFormation-Validate::W3010", reason="Availability zones are explicit in the spec on purpose: capacity reservations and "
                           "capacity blocks are bound to one AZ, so the subnets must be in exactly those AZs."))
    cluster = stack.platform_cluster.cluster
    _ack(cluster.role, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEKSClusterPolicy]",
         "EKS requires its cluster service role to carry AmazonEKSClusterPolicy; AWS keeps it in step with "
         "the control plane's needs. Safe because only the EKS service (eks.amazonaws.com) can assume the role.")

    node_policies = {
        "AmazonEKSWorkerNodePolicy": "lets kubelet describe the instance and register with the cluster",
        "AmazonEC2ContainerRegistryPullOnly": "pull-only ECR access for system and training images",
    }
    for name, why in node_policies.items():
        _ack(stack.node_role, f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{name}]",
             f"EKS node role: {why}. These are the AWS-maintained policies EKS documents for node roles. "
             "Safe because no pod can use them: the launch templates set the IMDS hop limit to 1, so only "
             "host processes (kubelet, hostNetwork agents) reach the node's credentials.")
    _ack(stack.platform_cluster.cni_role,
         "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEKS_CNI_Policy]",
         "The VPC CNI attaches ENIs and assigns pod IPs with the AWS-maintained policy EKS documents for it. "
         "Safe because only kube-system/aws-node of this cluster can assume the role (Pod Identity trust "
         "conditioned on account, cluster ARN, namespace and service account).")

    provider = cluster.node.try_find_child("KubectlProvider")
    if provider is not None:
        handler_why = ("The kubectl provider is aws-cdk-lib's aws-eks-v2 custom resource; its Lambda roles carry the "
                       "AWS-managed basic/VPC execution policies that CDK attaches ({}). Safe because only that "
                       "Lambda service role can use them and the handler applies only this stack's own manifests.")
        for policy in ("service-role/AWSLambdaBasicExecutionRole", "service-role/AWSLambdaVPCAccessExecutionRole"):
            _ack(provider, f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{policy}]",
                 handler_why.format(f"{policy.split('/')[-1]}: write its own logs, run in the private subnets "
                                    "to reach the private API endpoint"))
        _ack(provider, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                       "AmazonEC2ContainerRegistryReadOnly]",
             handler_why.format("ECR read so the handler can pull Helm charts from private ECR OCI registries"))
        handler = provider.node.find_child("Handler")
        ecr_public = handler.node.try_find_child("HasEcrPublic")
        cond_id = stack.get_logical_id(ecr_public) if ecr_public is not None else None
        if cond_id:
            _ack(provider,
                 'AwsSolutions-IAM4[Policy::{"Fn::If":["' + cond_id + '",{"Fn::Join":["",["arn:",{"Ref":'
                 '"AWS::Partition"},":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},'
                 '{"Ref":"AWS::NoValue"}]}]',
                 handler_why.format("public ECR read, only when a Helm chart comes from public.ecr.aws "
                                    "(the Neuron chart)"))
        _ack(provider, "AwsSolutions-L1",
             "The kubectl handler's runtime is pinned by aws-cdk-lib together with its kubectl/helm layer; "
             "it moves with aws-cdk-lib upgrades, not here. Safe because the function runs only at deploy time, "
             "inside the private subnets, on input from this stack's own template.")
        handler_arn = stack.get_logical_id(handler.node.default_child)
        _ack(provider, f"AwsSolutions-IAM5[Resource::<{handler_arn}.Arn>:*]",
             "The custom resource framework invokes every version/alias of its own kubectl handler and nothing "
             "else. Safe because the wildcard covers only that one function's versions.")

    logs_group = stack.platform_cluster.log_group
    account = "<AWS::AccountId>" if cdk.Token.is_unresolved(stack.account) else stack.account
    arn = f"arn:aws:logs:{stack.region}:{account}:log-group:{stack.platform_cluster.log_group_name}:*"
    _ack(logs_group, f"AwsSolutions-IAM5[Resource::{arn}]",
         "The control-plane log group is adopted by three SDK calls (create if missing, retention, KMS key); "
         "':*' is CloudWatch Logs' ARN form for one log group. Safe because it names exactly the cluster's "
         "/aws/eks/<cluster>/cluster group and the actions are CreateLogGroup, PutRetentionPolicy, AssociateKmsKey.")
    sdk = stack.node.try_find_child("AWS679f53fac002430cb0da5b7982bd2287")   # AwsCustomResource's singleton
    if sdk is not None:
        _ack(sdk, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                  "AWSLambdaBasicExecutionRole]",
             "aws-cdk-lib's AwsCustomResource function (the control-plane log group calls) carries the AWS-managed "
             "basic execution policy (its own logs). Safe because only that deploy-time function's role uses it.")

    gate = stack.governance.webhook_gate
    gate_why = ("The Kueue webhook readiness gate's function and the Provider framework's onEvent function carry the "
                "AWS-managed {} policy CDK attaches. Safe because only those two Lambda service roles use it, they "
                "run only during a deploy, and the gate's Kubernetes rights are one ClusterRole: create "
                "ResourceFlavors (it only ever sends dry runs).")
    for policy, what in (("service-role/AWSLambdaBasicExecutionRole", "basic execution (its own logs)"),
                         ("service-role/AWSLambdaVPCAccessExecutionRole",
                          "VPC access (ENIs in the private subnets, to reach the private API endpoint)")):
        _ack(gate, f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{policy}]", gate_why.format(what))
    gate_fn = stack.get_logical_id(gate.function.node.default_child)
    _ack(gate, f"AwsSolutions-IAM5[Resource::<{gate_fn}.Arn>:*]",
         "The Provider framework invokes every version/alias of the gate's own function and nothing else. Safe "
         "because the wildcard covers only that one function's versions.")

    role = stack.training_access.role
    datasets_id = stack.get_logical_id(stack.buckets.datasets.node.default_child)
    read_only = ("Safe because the statement is read-only and names only the datasets bucket, which every team "
                 "reads by design; checkpoints and logs are reachable only under the caller's own team prefix.")
    for action, what in (("s3:GetObject*", "object reads"), ("s3:GetBucket*", "bucket location/versioning reads"),
                         ("s3:List*", "listing dataset shards")):
        _ack(role, f"AwsSolutions-IAM5[Action::{action}]", f"Training pods read the datasets bucket ({what}). "
             + read_only)
    _ack(role, f"AwsSolutions-IAM5[Resource::<{datasets_id}.Arn>/*]",
         "Training pods read any dataset object. " + read_only)
    for name in ("checkpoints", "logs"):
        logical = stack.get_logical_id(getattr(stack.buckets, name).node.default_child)
        _ack(role, f"AwsSolutions-IAM5[Resource::<{logical}.Arn>/<aws:PrincipalTag/kubernetes-namespace>/*]",
             f"Jobs choose their own run and step names in the {name} bucket. Safe because the prefix is the "
             "calling pod's namespace, a session tag EKS Pod Identity sets and a pod cannot choose, so a team "
             "reaches only its own objects; no DeleteObjectVersion, so deletes leave recoverable versions.")
