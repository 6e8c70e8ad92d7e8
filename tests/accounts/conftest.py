# The role users and the source fixture are shared with the admin tests.
from tests.admin.conftest import plain_source, staff_client, viewer, viewer_client  # noqa: F401
