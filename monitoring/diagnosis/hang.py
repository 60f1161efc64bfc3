"""The diagnosis of an attempt the portal cancelled because it hung."""

from jobs.enums import FailureClass
from jobs.models import Attempt
from monitoring.diagnosis.diagnose import Diagnosis
from monitoring.models import AttemptProgress

HANG_TITLE = "Hung: no progress on any rank"
HANG_FIXES = (
    "Read the stacks of the ranks side by side: the rank named here stopped first; the "
    "others are usually waiting for it in a collective.",
    "A stopped or unresponsive rank points at its node (check its health, drain it): the "
    "restart policy resumes from the latest checkpoint without that node.",
    "If a rank waits on data, look at its DataLoader (workers, a stuck file system).",
    "Wrap long checkpoints and evaluations in portal_metrics.pause(...) so they are not "
    "taken for a hang.",
)


def hang_diagnosis(*, attempt: Attempt) -> Diagnosis | None:
    """Hang, naming the culprit, when the portal cancelled the attempt for it; else None."""
    progress = AttemptProgress.objects.filter(
        attempt_id=attempt.pk, hang_cancelled_at__isnull=False
    ).first()
    if progress is None:
        return None
    return Diagnosis(
        failure_class=str(FailureClass.HANG),
        title=HANG_TITLE,
        explanation=f"The portal cancelled the attempt: {progress.why}",
        fixes=HANG_FIXES,
        evidence=progress.why,
        rank=progress.culprit_rank,
        node=progress.culprit_node,
        exit_code=attempt.exit_code,
    )
