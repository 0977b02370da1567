"""What the remediation controller's IAM policy can name (``platform_constructs/node_agent.py``): the resource
types and condition keys of the two actions it may take, and the tag Auto Scaling sets on its instances."""

from __future__ import annotations

from openpod_core.facts.record import Fact

FACTS: tuple[Fact, ...] = (
    Fact(
        "iam.autoscaling.set-instance-health", "autoscaling:SetInstanceHealth: resource type autoScalingGroup "
        "(arn:${Partition}:autoscaling:${Region}:${Account}:autoScalingGroup:${GroupId}:autoScalingGroupName/"
        "${GroupFriendlyName}); condition keys autoscaling:ResourceTag/${TagKey}, aws:ResourceTag/${TagKey}",
        "udondan/iam-floyd@v0.822.0:lib/generated/policy-statements/autoscaling.ts:703-712,851-867,1163-1177,"
        "1306-1320", "2026-11-28",
        "iam-floyd generates these from the Service Authorization Reference "
        "(https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2autoscaling.html). "
        "The controller's statement names each of the platform's groups by ARN (its GroupId left '*')",
    ),
    Fact(
        "iam.ec2.reboot-instances", "ec2:RebootInstances: resource type instance; aws:ResourceTag/${TagKey} "
        "applies to it",
        "udondan/iam-floyd@v0.822.0:lib/generated/policy-statements/ec2.ts:8642-8650,11170-11212,13819,14011",
        "2026-11-28",
        "generated from https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html; the "
        "controller's statement requires aws:ResourceTag/aws:autoscaling:groupName to name one of the platform's "
        "groups",
    ),
    Fact(
        "autoscaling.group-name-tag", "Auto Scaling tags every instance it launches aws:autoscaling:groupName = "
        "<group name>; tag keys with the aws: prefix are reserved for AWS and cannot be set by users",
        "https://docs.aws.amazon.com/autoscaling/ec2/userguide/ec2-auto-scaling-tagging.html (Tag naming and usage "
        "restrictions)", "2026-11-28",
        "why the reboot condition cannot be met by an instance outside the platform's groups, whatever tags its "
        "owner may set",
    ),
    Fact(
        "eks.nodegroup.asg-name", "DescribeNodegroup returns the node group's Auto Scaling groups in "
        "nodegroup.resources.autoScalingGroups[].name",
        "boto/botocore@1.44.8:botocore/data/eks/2017-11-01/service-2.json (shapes DescribeNodegroupResponse, "
        "NodegroupResources, AutoScalingGroup)", "2026-11-28",
        "EKS names the group itself; a custom resource reads the name at deploy time (again when the node group "
        "is replaced). The NodegroupName attribute is passed, not the resource's Ref, which is <cluster>/<name> "
        "(the resource's primary identifier Id: aws-cloudformation/cfn-lint@v1.58.0:src/cfnlint/data/schemas/"
        "resources/e703fb10b42108ae.json)",
    ),
)
