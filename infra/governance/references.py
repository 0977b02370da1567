"""Whether a string is a container image reference or a Kubernetes environment variable name, checked before a
job is built (the API server or the kubelet would refuse it later, after the JobSet exists)."""

from __future__ import annotations

import re

# distribution/reference's grammar (fact image.reference-grammar): name [":" tag] ["@" digest], the name an
# optional domain[:port]/ and lowercase path components.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(rf"(?:({_DOMAIN})/)?({_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
                             rf"(?::({_TAG}))?(?:@({_DIGEST}))?", re.ASCII)
MAX_REPOSITORY = 255
# Kubernetes' strict env var name (fact k8s.env-var-name), which every API server version accepts.
ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*", re.ASCII)


def image_problem(image: str) -> str | None:
    """Why ``image`` is not an image reference, or None."""
    if not image.strip():
        return "is empty; give the training image, e.g. 123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1.0"
    m = IMAGE_REFERENCE.fullmatch(image)
    if m is None:
        hint = "upper-case letters in the repository name" if IMAGE_REFERENCE.fullmatch(image.lower()) else \
            "whitespace" if any(c.isspace() for c in image) else "characters outside the reference grammar"
        return (f"is not an image reference ({hint}); use [registry[:port]/]repository[:tag][@sha256:digest], "
                "the repository lowercase")
    if len(m.group(2)) > MAX_REPOSITORY:
        return f"has a repository path of {len(m.group(2))} characters; at most {MAX_REPOSITORY}"
    return None


def env_name_problem(name: str) -> str | None:
    """Why ``name`` is not an environment variable name Kubernetes takes, or None."""
    if not ENV_NAME.fullmatch(name) or name == "." or name.startswith(".."):
        return ("is not an environment variable name; use letters, digits, '_', '-' or '.', not starting with a "
                "digit or '..'")
    return None
