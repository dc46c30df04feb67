import pytest

pytestmark = pytest.mark.torch
