"""Two of the distinct messages' five indexes go: the LIKE index Django builds beside a `unique=True` column
(the digest is unique through a constraint now) and the foreign key's own index (errormessage_group_seen leads
with the group). Ingest writes this table with every batch of failing deliveries. The table holds one row per
distinct message (thousands): the foreign key's re-check is quick, and the table is locked only for that."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deliveries', '0017_stream_period_rollup'),
    ]

    operations = [
        migrations.AlterField(
            model_name='errormessage',
            name='digest',
            field=models.CharField(max_length=32),
        ),
        migrations.AlterField(
            model_name='errormessage',
            name='error_group',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='messages', to='deliveries.errorgroup'),
        ),
        migrations.AddConstraint(
            model_name='errormessage',
            constraint=models.UniqueConstraint(fields=('digest',), name='errormessage_digest'),
        ),
    ]
